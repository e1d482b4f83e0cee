import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from '../../src/app/config.ts';
import { createServer } from '../../src/app/server.ts';
import { makeObservationStarted, makeObservationStopped, observationStream } from '../../src/core/events/index.ts';
import type { RolloutHaltedData } from '../../src/core/events/index.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { historyInStore, testKey } from '../support/history.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';

// An engine that runs no ingest (serve without --amqp) may drive rollouts on a store another
// engine observes. It hears no node: a node still behind at its wave's timeout is judged by its
// latest recorded transition (docs/design.md §3, §8 "Abort criteria"), not by a folded last-seen
// time that stands at the node's NodeHeard, hours old, while the node is alive.

test('driven without ingest, a late node heard long ago and never recorded silent is recorded a timeout', async (t) => {
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  // Another engine observes throughout; it heard slow-1 a week ago (the history's clock) and not since lost it.
  await store.append([
    { stream: observationStream, expected: 'any', events: [makeObservationStarted('engine-a', h.now().getTime(), 60_000, null)] },
  ]);
  await h.heard('slow-1');
  const config = loadConfig(
    { flags: {}, env: {} },
    { store: 'memory:', port: '0', logLevel: 'silent', apiTokens: 'operator-token:read,send', graceMs: '60000' },
  );
  const engine = createServer({ config, logger, store, key: testKey, dashboardDir: null });
  t.after(async () => {
    await engine.stop();
    await store.close();
  });
  await engine.start();
  await engine.runner.caughtUp();
  const started = await engine.app.inject({
    method: 'POST',
    url: '/v1/rollouts',
    headers: { authorization: 'Bearer operator-token', 'content-type': 'application/json' },
    payload: JSON.stringify({
      rollout: 'late',
      resources: [{ id: 'web', image: 'nginx:1.27' }],
      selection: { kind: 'nodes', nodes: ['slow-1'] },
      waves: '100%',
      maxFailures: '0',
      waveTimeoutMs: 1_000,
    }),
  });
  assert.equal(started.statusCode, 202, started.body);
  // Nothing relays the declaration: the node never reports, and the wave times out with it behind.
  const halted = await until('the rollout to halt', async () => {
    const events = await store.readStream('rollout-late');
    return events.find((e) => e.type === 'RolloutHalted') ?? null;
  });
  const failed = (halted.data as RolloutHaltedData).failed;
  assert.deepEqual(
    failed.map((f) => f.reason),
    ['timeout'],
    failed[0]?.detail,
  );
});

test('driven without ingest while no engine observes: no timeout until one observes again and a grace has passed', async (t) => {
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  const span = (e: Parameters<typeof store.append>[0][number]['events'][number]) =>
    store.append([{ stream: observationStream, expected: 'any', events: [e] }]);
  // The only engine observing lost its broker: no report reaches the store from now on.
  await span(makeObservationStarted('engine-a', h.now().getTime(), 1_000, null));
  await h.heard('slow-1');
  await span(makeObservationStopped('engine-a', Date.now(), 'broker-lost'));
  const config = loadConfig(
    { flags: {}, env: {} },
    { store: 'memory:', port: '0', logLevel: 'silent', apiTokens: 'operator-token:read,send', graceMs: '1000', lastSeenFlushMs: '200' },
  );
  const engine = createServer({ config, logger, store, key: testKey, dashboardDir: null });
  t.after(async () => {
    await engine.stop();
    await store.close();
  });
  await engine.start();
  await engine.runner.caughtUp();
  const started = await engine.app.inject({
    method: 'POST',
    url: '/v1/rollouts',
    headers: { authorization: 'Bearer operator-token', 'content-type': 'application/json' },
    payload: JSON.stringify({
      rollout: 'cut',
      resources: [{ id: 'web', image: 'nginx:1.27' }],
      selection: { kind: 'nodes', nodes: ['slow-1'] },
      waves: '100%',
      maxFailures: '0',
      waveTimeoutMs: 300,
    }),
  });
  assert.equal(started.statusCode, 202, started.body);
  const events = () => store.readStream('rollout-cut');
  const sent = await until('the wave sent', async () => (await events()).find((e) => e.type === 'RolloutSent') ?? null);
  const sentAt = Date.parse((sent.data as { sentAt: string }).sentAt);
  // Past the timeout and a grace more, on the engine's clock, then whole rounds of decisions.
  await until('the timeout and a grace past', () => Date.now() > sentAt + 300 + 1_000);
  for (let i = 0; i < 3; i++) await engine.rollouts!.nextRound();
  assert.equal(
    (await events()).find((e) => e.type === 'RolloutHalted'),
    undefined,
    'no timeout decided while no engine observes',
  );

  await span(makeObservationStarted('engine-a', Date.now(), 1_000, null));
  const halted = await until('the rollout to halt', async () => (await events()).find((e) => e.type === 'RolloutHalted') ?? null);
  const failed = (halted.data as RolloutHaltedData).failed;
  assert.deepEqual(
    failed.map((f) => f.reason),
    ['timeout'],
  );
  assert.match(failed[0]?.detail ?? '', /timeout held/, 'the failure says it was decided after the outage');
});
