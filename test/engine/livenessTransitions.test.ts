import assert from 'node:assert/strict';
import { test } from 'node:test';
import { observationStream, streamOf } from '../../src/core/events/index.ts';
import type { Recorded } from '../../src/core/events/index.ts';
import { encodeAlive, encodeReport } from '../../src/core/wire/index.ts';
import { createIngest } from '../../src/engine/ingest/index.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { createInProcessBroker } from '../../src/transport/inProcess.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';

// Liveness recorded as transitions (docs/design.md §3 "Liveness as recorded"): nothing is appended
// while a node stays alive; NodeHeard when heard while not held heard, NodeSilent with the exact
// last-seen time once the grace passes on the monotonic clock, and the observation span around it.
// Both clocks are the test's: the wall clock stamps events, the monotonic one judges the grace.

const T0 = Date.parse('2026-03-01T00:00:00Z');
const graceMs = 6_000;

function rig(store: EventStore = createMemoryEventStore()) {
  const clock = { wall: T0, mono: 0 };
  const broker = createInProcessBroker();
  const ingest = createIngest({
    store,
    source: broker.ingestSource(),
    logger,
    flushMs: 1,
    now: () => new Date(clock.wall),
    liveness: { engine: 'e1', graceMs, flushMs: 100, mono: () => clock.mono },
  });
  /** Advance both clocks. */
  const tick = (ms: number): void => {
    clock.wall += ms;
    clock.mono += ms;
  };
  const alive = async (node: string): Promise<void> => {
    const before = ingest.stats().received;
    broker.inject('alive', encodeAlive({ node }), { userId: node });
    await until('the alive received', async () => ingest.stats().received > before && ingest.stats().pending === 0);
  };
  return { store, broker, ingest, clock, tick, alive };
}

const types = (events: readonly Recorded[]): string[] => events.map((e) => e.type);

test('a node alive every 5 s for ten minutes is recorded once; its silence once, with the exact last-seen time and the grace', async () => {
  const { store, ingest, tick, alive, clock } = rig();
  await ingest.start();
  for (let i = 0; i < 120; i++) {
    await alive('n1');
    tick(5_000);
  }
  const lastSeen = clock.wall - 5_000;
  assert.deepEqual(types(await store.readStream(streamOf('n1'))), ['NodeHeard'], 'nothing appended while the node stays alive');
  // Silent: the grace passes on the monotonic clock, and the sweep records it.
  tick(graceMs);
  const silent = await until('the silence recorded', async () =>
    (await store.readStream(streamOf('n1'))).find((e) => e.type === 'NodeSilent'),
  );
  assert.equal(silent.type === 'NodeSilent' && silent.data.lastSeenAt, new Date(lastSeen).toISOString());
  assert.equal(silent.type === 'NodeSilent' && silent.data.graceMs, graceMs);
  // Heard again: a NodeHeard naming when it was heard before.
  tick(60_000);
  await alive('n1');
  await until('heard again', async () => (await store.readStream(streamOf('n1'))).length === 3);
  const events = await store.readStream(streamOf('n1'));
  assert.deepEqual(types(events), ['NodeHeard', 'NodeSilent', 'NodeHeard']);
  const heard = events[2]!;
  assert.equal(heard.type === 'NodeHeard' && heard.data.lastSeenBefore, new Date(lastSeen).toISOString());
  await ingest.stop();
});

test('the wall clock jumping forward does not make a node silent: the grace is judged on the monotonic clock', async () => {
  const { store, ingest, alive, clock } = rig();
  await ingest.start();
  await alive('n1');
  clock.wall += 3_600_000;
  clock.mono += 1_000;
  await alive('n1');
  // Give the sweep a few real turns: nothing may come of the jump.
  await new Promise((r) => setTimeout(r, 1_500));
  assert.deepEqual(types(await store.readStream(streamOf('n1'))), ['NodeHeard']);
  await ingest.stop();
});

test('a report from a node not held heard records NodeHeard before the report', async () => {
  const { store, broker, ingest } = rig();
  await ingest.start();
  const body = encodeReport({ node: 'n1', applied: [], failed: {}, refused: '', carried: [], declared: null });
  broker.inject('report', body, { userId: 'n1' });
  await until('stored', async () => (await store.readStream(streamOf('n1'))).length === 2);
  assert.deepEqual(types(await store.readStream(streamOf('n1'))), ['NodeHeard', 'ReportReceived']);
  await ingest.stop();
});

test('a stop flushes the lease and closes the span; the next start seeds last-seen from it and names the last flush', async () => {
  const store = createMemoryEventStore();
  const first = rig(store);
  await first.ingest.start();
  await first.alive('n1');
  const seen = first.clock.wall;
  first.tick(1_000);
  await first.ingest.stop();
  const lease = await store.loadLastSeen();
  assert.equal(lease.nodes.get('n1'), seen);
  const flushedAt = lease.flushes.get('e1');
  assert.ok(flushedAt !== undefined && flushedAt >= seen);

  const second = rig(store);
  second.clock.wall = first.clock.wall + 60_000;
  await second.ingest.start();
  // Known before any alive: the API's exact last-seen time outlives the restart.
  assert.equal(second.ingest.lastSeenAt('n1')?.getTime(), seen);
  const spans = await store.readStream(observationStream);
  assert.deepEqual(types(spans), ['ObservationStarted', 'ObservationStopped', 'ObservationStarted']);
  const start = spans[2]!;
  assert.equal(start.type === 'ObservationStarted' && start.data.lastFlushAt, new Date(flushedAt).toISOString());
  // Not heard within the grace of this start: recorded silent once, with the leased time.
  second.tick(graceMs);
  await until('the silence recorded', async () => (await store.readStream(streamOf('n1'))).some((e) => e.type === 'NodeSilent'));
  await second.ingest.stop();

  // A third start judges the same silence again: the same event id, so nothing new is written.
  const third = rig(store);
  await third.ingest.start();
  third.tick(graceMs);
  await new Promise((r) => setTimeout(r, 1_500));
  await third.ingest.stop();
  assert.deepEqual(types(await store.readStream(streamOf('n1'))), ['NodeHeard', 'NodeSilent']);
});
