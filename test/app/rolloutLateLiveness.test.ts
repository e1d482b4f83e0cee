import assert from 'node:assert/strict';
import { test } from 'node:test';
import { streamOf } from '../../src/core/events/index.ts';
import type { RolloutHaltedData } from '../../src/core/events/index.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { testKey } from '../support/history.ts';
import { oneWaveRollout } from '../support/oneWaveRollout.ts';
import { serveInProcess } from '../support/serveInProcess.ts';
import { until } from '../support/until.ts';

// A node still behind when its wave times out is 'silent' only if the engine does not hear it
// then (docs/design.md §8 "Abort criteria"). Alive is not stored while a node stays heard (docs/design.md
// §3): its folded last-seen time is the NodeHeard's, so the driver must judge by the ingest's exact
// time, as the node's own liveness is judged, or a node alive throughout reads as silent.

test('a node alive throughout its wave but not caught up at the timeout is a timeout, not silent', async (t) => {
  let alive = true;
  t.after(() => void (alive = false));
  const store = createMemoryEventStore();
  const { engine, broker } = await serveInProcess(t, store, {
    settings: { apiTokens: 'operator-token:read,send', graceMs: '3000', lastSeenFlushMs: '200' },
    broker: 'in-process',
    key: testKey,
  });
  let n = 0;
  const link = broker.nodeLink('slow-1');
  const beat = async (): Promise<void> => {
    while (alive) {
      await link.publish('alive', Buffer.from(JSON.stringify({ node: 'slow-1' })), `alive-${n++}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const beating = beat();
  await until('slow-1 to be heard', () => (engine.runner.readModel.get('slow-1')?.lastSeenAt ?? null) !== null);

  const started = await engine.app.inject({
    method: 'POST',
    url: '/v1/rollouts',
    headers: { authorization: 'Bearer operator-token', 'content-type': 'application/json' },
    // Past the grace, so a last-seen time frozen at the NodeHeard is judged silent by then.
    payload: JSON.stringify(oneWaveRollout('late', ['slow-1'], 6_000)),
  });
  assert.equal(started.statusCode, 202, started.body);
  // The node hears its declaration and never reports: the wave times out with it behind.
  const halted = await until('the rollout to halt', async () => {
    const events = await store.readStream('rollout-late');
    return events.find((e) => e.type === 'RolloutHalted') ?? null;
  });
  alive = false;
  await beating;
  const failed = (halted.data as RolloutHaltedData).failed;
  assert.equal(failed.length, 1);
  // Had the test's own process stalled past the grace, the engine would have recorded the silence
  // and 'silent' would be right: the record says which to expect.
  const silences = (await store.readStream(streamOf('slow-1'))).filter((e) => e.type === 'NodeSilent');
  assert.equal(failed[0]!.reason, silences.length === 0 ? 'timeout' : 'silent', failed[0]!.detail);
});
