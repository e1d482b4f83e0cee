import assert from 'node:assert/strict';
import { test } from 'node:test';
import { generateSigningKey } from '../../src/core/declaration/index.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { createInProcessBroker } from '../../src/transport/inProcess.ts';
import type { DeclarationPublisher } from '../../src/transport/port.ts';
import { encodeReport } from '../../src/core/wire/index.ts';
import { withStoreFaults } from '../support/faults/withStoreFaults.ts';
import { serveInProcess } from '../support/serveInProcess.ts';
import { until } from '../support/until.ts';

// With SQLite full, /healthz and /readyz said ready with lag 0, and no metric
// showed ingest failing. The engine as `serve` builds it, asked over HTTP (inject).

const metric = (text: string, name: string): number | null => {
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  return m === null ? null : Number(m[1]);
};

test('while appends fail, /readyz answers 503 CONVERGE_ERR_INGEST_FAILING and the metrics say so; once they pass again, ready', async (t) => {
  const store = withStoreFaults(createMemoryEventStore());
  const { engine, broker } = await serveInProcess(t, store, { broker: 'in-process' });
  const report = (i: number): void =>
    broker.inject('report', encodeReport({ node: 'n1', applied: [`r${i}`], failed: {}, refused: '', carried: [], declared: null }), {
      messageId: `m${i}`,
      userId: 'n1',
    });
  report(0);
  await until('the first report stored', () => engine.runner.readModel.get('n1') !== undefined);
  let res = await engine.app.inject({ method: 'GET', url: '/readyz' });
  assert.equal(res.statusCode, 200, res.body);

  store.faults.failAppends(true);
  report(1);
  await until('ingest to see the failure', () => engine.ingest?.isHealthy() === false);
  res = await engine.app.inject({ method: 'GET', url: '/readyz' });
  assert.equal(res.statusCode, 503, res.body);
  const problem = res.json() as { code: string; details: { failingSinceMs: number; pending: number; error: string } };
  assert.equal(problem.code, 'CONVERGE_ERR_INGEST_FAILING');
  assert.equal(problem.details.pending, 1);
  assert.match(problem.details.error, /CONVERGE_ERR_STORE_UNAVAILABLE/);
  const health = await engine.app.inject({ method: 'GET', url: '/healthz' });
  assert.equal(health.statusCode, 200, 'the process is alive: restarting it would not empty the disk');
  assert.equal((health.json() as { ingest: { healthy: boolean } }).ingest.healthy, false);
  const text = (await engine.app.inject({ method: 'GET', url: '/metrics' })).body;
  assert.equal(metric(text, 'converge_ingest_healthy'), 0);
  assert.equal(metric(text, 'converge_ingest_pending'), 1);
  assert.ok((metric(text, 'converge_ingest_last_append_age_seconds') ?? -1) >= 0, text);

  store.faults.failAppends(false);
  await until('the held report stored', () => engine.runner.readModel.get('n1')?.reported?.applied[0] === 'r1');
  res = await engine.app.inject({ method: 'GET', url: '/readyz' });
  assert.equal(res.statusCode, 200, res.body);
  const after = (await engine.app.inject({ method: 'GET', url: '/metrics' })).body;
  assert.equal(metric(after, 'converge_ingest_healthy'), 1);
  assert.equal(metric(after, 'converge_ingest_pending'), 0);
});

test('while declarations cannot be published, /readyz answers 503 CONVERGE_ERR_RELAY_FAILING and converge_relay_healthy is 0', async (t) => {
  const broker = createInProcessBroker();
  const real = broker.declarationPublisher();
  let failing = true;
  const publisher: DeclarationPublisher = {
    publish: async (d) => {
      if (failing) throw new Error('broker refused the publish (injected)');
      await real.publish(d);
    },
    close: () => real.close(),
  };
  const { engine } = await serveInProcess(t, createMemoryEventStore(), {
    key: generateSigningKey(),
    transport: { ingestSource: broker.ingestSource(), publisher },
  });
  await engine.send!('n1', [{ id: 'web' }]);
  await until('the relay to fail', () => engine.relay?.health().healthy === false);
  const res = await engine.app.inject({ method: 'GET', url: '/readyz' });
  assert.equal(res.statusCode, 503, res.body);
  assert.equal((res.json() as { code: string }).code, 'CONVERGE_ERR_RELAY_FAILING');
  assert.equal(metric((await engine.app.inject({ method: 'GET', url: '/metrics' })).body, 'converge_relay_healthy'), 0);
  failing = false;
  await until('the relay to recover', () => engine.relay?.health().healthy === true, 30_000);
  assert.equal((await engine.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
  assert.equal(metric((await engine.app.inject({ method: 'GET', url: '/metrics' })).body, 'converge_relay_healthy'), 1);
});
