import assert from 'node:assert/strict';
import { test } from 'node:test';
import { makeObservationStarted, makeObservationStopped } from '../../src/core/events/index.ts';
import type { RolloutHaltedData } from '../../src/core/events/index.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { historyInStore, recordObservation, testKey } from '../support/history.ts';
import { oneWaveRollout } from '../support/oneWaveRollout.ts';
import { serveInProcess } from '../support/serveInProcess.ts';
import { until } from '../support/until.ts';

// An engine that runs no ingest (serve without --amqp) may drive rollouts on a store another
// engine observes. It hears no node: a node still behind at its wave's timeout is judged by its
// latest recorded transition (docs/design.md §3, §8 "Abort criteria"), not by a folded last-seen
// time that stands at the node's NodeHeard, hours old, while the node is alive.

test('driven without ingest, a late node heard long ago and never recorded silent is recorded a timeout', async (t) => {
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  // Another engine observes throughout; it heard slow-1 a week ago (the history's clock) and not since lost it.
  await recordObservation(store, makeObservationStarted('engine-a', h.now().getTime(), 60_000, null));
  await h.heard('slow-1');
  const { engine } = await serveInProcess(t, store, {
    settings: { apiTokens: 'operator-token:read,send', graceMs: '60000' },
    key: testKey,
    caughtUp: true,
  });
  const started = await engine.app.inject({
    method: 'POST',
    url: '/v1/rollouts',
    headers: { authorization: 'Bearer operator-token', 'content-type': 'application/json' },
    payload: JSON.stringify(oneWaveRollout('late', ['slow-1'], 1_000)),
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
  // The only engine observing lost its broker: no report reaches the store from now on.
  await recordObservation(store, makeObservationStarted('engine-a', h.now().getTime(), 1_000, null));
  await h.heard('slow-1');
  await recordObservation(store, makeObservationStopped('engine-a', Date.now(), 'broker-lost'));
  const { engine } = await serveInProcess(t, store, {
    settings: { apiTokens: 'operator-token:read,send', graceMs: '1000', lastSeenFlushMs: '200' },
    key: testKey,
    caughtUp: true,
  });
  const started = await engine.app.inject({
    method: 'POST',
    url: '/v1/rollouts',
    headers: { authorization: 'Bearer operator-token', 'content-type': 'application/json' },
    payload: JSON.stringify(oneWaveRollout('cut', ['slow-1'], 300)),
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

  await recordObservation(store, makeObservationStarted('engine-a', Date.now(), 1_000, null));
  const halted = await until('the rollout to halt', async () => (await events()).find((e) => e.type === 'RolloutHalted') ?? null);
  const failed = (halted.data as RolloutHaltedData).failed;
  assert.deepEqual(
    failed.map((f) => f.reason),
    ['timeout'],
  );
  assert.match(failed[0]?.detail ?? '', /timeout held/, 'the failure says it was decided after the outage');
});
