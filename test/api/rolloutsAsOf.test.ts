import assert from 'node:assert/strict';
import { test } from 'node:test';
import { rolloutStreamOf } from '../../src/core/events/index.ts';
import type { Recorded, RolloutStarted } from '../../src/core/events/index.ts';
import { apiHarness, read, write } from '../support/apiHarness.ts';

// POST /v1/rollouts {"asOf": …}: a rollout whose targets are each sent the spec they had then
// (the driver's side is test/engine/rolloutAsOf.test.ts). The plan records the moment.

const post = (body: unknown) => ({
  method: 'POST' as const,
  url: '/v1/rollouts',
  headers: { ...write, 'content-type': 'application/json' },
  payload: JSON.stringify(body),
});
const plan = { selection: { kind: 'nodes', nodes: ['n1', 'n2'] }, waves: '1,100%', waveTimeoutMs: 60_000 };

test('asOf as a time or a store position is recorded and shown; both, neither, or a time to come is refused', async (t) => {
  const h = await apiHarness();
  t.after(() => h.close());
  await h.history.send('n1', [{ id: 'web', image: 'nginx:1.26' }]);
  const asOf = h.history.now().toISOString();
  h.history.tick(60_000);
  await h.history.send('n1', [{ id: 'web', image: 'nginx:1.27' }]);
  await h.settle();

  const byTime = await h.app.inject(post({ rollout: 'then', asOf, ...plan }));
  assert.equal(byTime.statusCode, 202, byTime.body);
  const view = (await h.app.inject({ url: '/v1/rollouts/then', headers: read })).json();
  assert.deepEqual(view.asOf, { at: asOf, position: null });
  const started = (await h.store.readStream(rolloutStreamOf('then')))[0] as Recorded<RolloutStarted>;
  assert.deepEqual(started.data.resources, []);
  assert.equal(started.data.asOf?.at, asOf);
  assert.match(started.data.asOf?.upTo ?? '', /^\d+$/);

  const byPosition = await h.app.inject(post({ rollout: 'at-pos', asOf: '1', ...plan }));
  assert.equal(byPosition.statusCode, 202, byPosition.body);
  assert.deepEqual((await h.app.inject({ url: '/v1/rollouts/at-pos', headers: read })).json().asOf, { at: null, position: '1' });
  const plain = (await h.app.inject({ url: '/v1/rollouts', headers: read })).json();
  assert.equal(plain.count, 2);

  const spec = [{ id: 'web', image: 'nginx:1.27' }];
  assert.equal((await h.app.inject(post({ asOf, resources: spec, ...plan }))).statusCode, 400, 'both');
  assert.equal((await h.app.inject(post(plan))).statusCode, 400, 'neither');
  const future = await h.app.inject(post({ asOf: new Date(h.history.now().getTime() + 3_600_000).toISOString(), ...plan }));
  assert.equal(future.json().code, 'CONVERGE_ERR_ROLLOUT_PLAN');
  assert.match(future.json().detail, /a time to come/);
  const bad = await h.app.inject(post({ asOf: 'yesterday', ...plan }));
  assert.equal(bad.json().code, 'CONVERGE_ERR_ROLLOUT_PLAN');
});
