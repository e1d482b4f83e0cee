import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import type { NodeState } from '../../projections/index.ts';
import { createMetrics } from '../../src/metrics.ts';
import { createProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import { createReadModel } from '../../src/readModel/readModel.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { apiHarness, write } from '../support/apiHarness.ts';
import { history, historyInStore } from '../support/history.ts';
import { until } from '../support/until.ts';

// The read model must never skip an event. A fold that throws (here: a state
// whose send history is not what the fold expects, as a forged snapshot once made it) stops the
// projection where it is, loudly, and a POST whose declaration was recorded still answers 202.

/** A state the fold cannot continue from: the next send or report throws inside foldNode. */
const broken = (s: NodeState): NodeState => ({
  ...s,
  sent: s.sent ?? ({} as NodeState['sent']),
  earlierSends: {} as unknown as NodeState['earlierSends'],
});

test('a fold that throws leaves the read model at the last event it folded; the same events again fold nothing past it', () => {
  const h = history('f1');
  const first = h.send();
  const model = createReadModel();
  model.apply([first]);
  model.set(broken(model.get('f1')!));
  const report = h.report({ declared: 'f'.repeat(64) }); // classified against the send history, which is broken
  const later = h.alive();
  assert.throws(() => model.apply([report, later]));
  assert.equal(model.position(), first.position, 'the position stays at the last event folded');
  assert.equal(model.get('f1')?.reports, 0);
  // A retried batch meets the same event again, not the one after it.
  assert.throws(() => model.apply([report, later]));
  assert.equal(model.position(), first.position);
});

test('a fold that throws stops the projection: not ready, converge_projection_failed 1, an error log naming the event, nothing after it folded', async (t) => {
  const store = createMemoryEventStore();
  const steps = historyInStore(store);
  const lines: string[] = [];
  const log = pino({ level: 'info' }, { write: (l: string) => void lines.push(l) });
  const metrics = createMetrics();
  const runner = createProjectionRunner({ store, logger: log, metrics });
  t.after(() => runner.stop());
  await steps.alive('f2');
  await runner.start();
  await runner.caughtUp();
  runner.readModel.set(broken(runner.readModel.get('f2')!));
  const bad = await steps.send('f2');
  await steps.alive('other');
  await until('the projection to stop', () => !runner.isReady());
  assert.equal(runner.readModel.position(), bad.position - 1n);
  assert.equal(runner.readModel.get('other'), undefined, 'nothing after the failing event is folded');
  assert.deepEqual(
    { position: runner.failure()?.position, type: runner.failure()?.type, node: runner.failure()?.node },
    { position: bad.position, type: 'DeclarationSent', node: 'f2' },
  );
  assert.match(await metrics.registry.getSingleMetricAsString('converge_projection_failed'), /converge_projection_failed 1/);
  const error = lines
    .map((l) => JSON.parse(l) as { level: number; position?: string; type?: string; msg: string })
    .find((l) => l.level >= 50);
  assert.ok(error !== undefined, 'an error was logged');
  assert.equal(error.position, bad.position.toString());
  assert.equal(error.type, 'DeclarationSent');
});

test('a stopped projection makes /readyz answer 503 naming the event, and a recorded POST still answers 202', async (t) => {
  const h = await apiHarness({ sendVisibleMs: 60_000 });
  t.after(() => h.close());
  await h.history.alive('f3');
  await h.settle();
  h.runner.readModel.set(broken(h.runner.readModel.get('f3')!));
  const post = await h.app.inject({
    method: 'POST',
    url: '/v1/nodes/f3/declarations',
    headers: write,
    payload: { resources: [{ id: 'web' }] },
  });
  assert.equal(post.statusCode, 202, post.body);
  assert.match(post.json().digest, /^[0-9a-f]{64}$/);
  await until('the projection to stop', () => !h.runner.isReady());
  const ready = await h.app.inject({ url: '/readyz' });
  assert.equal(ready.statusCode, 503);
  assert.equal(ready.json().code, 'CONVERGE_ERR_PROJECTION_FAILED');
  assert.equal(ready.json().details.position, (await h.store.headPosition())?.toString());
  const health = (await h.app.inject({ url: '/healthz' })).json();
  assert.equal(health.ready, false);
});
