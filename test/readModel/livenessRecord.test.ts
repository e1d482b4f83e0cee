import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createFleetFold, eventTime, nodeView, stateAt, summarizeFleet } from '../../projections/index.ts';
import type { At } from '../../projections/index.ts';
import { observationEventId, streamOf } from '../../src/core/events/index.ts';
import type { ObservationStarted, ObservationStopped, Recorded, WithId } from '../../src/core/events/index.ts';
import { createFleetHistory } from '../../src/readModel/fleetHistory.ts';
import { describeTimeline } from '../../src/readModel/nodeTimeline.ts';
import { stateAsOf } from '../../src/readModel/queries.ts';
import { createReadModel } from '../../src/readModel/readModel.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { historyInStore, recordObservation } from '../support/history.ts';

// Liveness as recorded (docs/design.md §3): historical answers come from the record's transitions
// and its own grace, and a store written by the old rule (AliveSeen at most every 15 s) answers
// exactly as it did.

const at = (ms: number): At => ({ kind: 'time', time: ms, iso: new Date(ms).toISOString() });

async function readAll(store: EventStore): Promise<Recorded[]> {
  const out: Recorded[] = [];
  for await (const batch of store.readAll({ streamPrefix: 'node-' })) out.push(...batch);
  return out;
}

const started = (engine: string, ms: number, graceMs: number, lastFlushAt: number | null): WithId<ObservationStarted> => {
  const iso = new Date(ms).toISOString();
  return {
    id: observationEventId(engine, 'ObservationStarted', iso),
    type: 'ObservationStarted',
    data: { engine, at: iso, graceMs, lastFlushAt: lastFlushAt === null ? null : new Date(lastFlushAt).toISOString() },
  };
};
const stopped = (engine: string, ms: number): WithId<ObservationStopped> => {
  const iso = new Date(ms).toISOString();
  return {
    id: observationEventId(engine, 'ObservationStopped', iso),
    type: 'ObservationStopped',
    data: { engine, at: iso, why: 'stopped' },
  };
};
test('old rule: a store of AliveSeen every 15 s answers every historical question as before (state --at, fleet --at)', async () => {
  const store = createMemoryEventStore();
  const s = historyInStore(store);
  // Three nodes: one alive throughout, one that goes quiet for two minutes and comes back, one that reports and then dies.
  for (let i = 0; i < 40; i++) {
    await s.alive('steady');
    if (i < 10 || i > 18) await s.alive('flaky');
    if (i === 3) await s.send('dying');
    if (i < 6) await s.report('dying', { declared: s.digests('dying').at(-1) ?? null });
    s.tick(15_000);
  }
  const events = await readAll(store);
  const readModel = createReadModel();
  const fleet = createFleetHistory({ store, readModel, graceMs: 60_000 });
  readModel.apply(events);
  const first = Date.parse(eventTime(events[0]!));
  for (let t = first - 1_000; t <= s.now().getTime() + 120_000; t += 7_000) {
    for (const node of ['steady', 'flaky', 'dying']) {
      for (const grace of [undefined, 6_000, 60_000]) {
        const stream = await store.readStream(streamOf(node));
        const today = stateAt(node, stream, at(t));
        const expected = nodeView(today.state, t, grace);
        const got = await stateAsOf(store, node, at(t), grace);
        assert.deepEqual(got.state, expected, `${node} as of ${new Date(t).toISOString()}, grace ${grace}`);
      }
    }
    const fold = createFleetFold(at(t));
    for (const e of events) fold.push(e);
    const { position: _p, moment: _m, ...got } = await fleet.at(at(t));
    assert.deepEqual(got, summarizeFleet(fold.states().values(), t, 60_000), `fleet as of ${new Date(t).toISOString()}`);
  }
});

test('the record is self-contained: an engine with grace 6 s, a node silent 13 s reads disconnected whatever grace the reader passes', async () => {
  const store = createMemoryEventStore();
  const s = historyInStore(store);
  await recordObservation(store, started('e1', s.now().getTime(), 6_000, null));
  s.tick(1_000);
  await s.heard('n1');
  const lastSeen = s.now().getTime() + 2_000;
  s.tick(2_000);
  await s.report('n1');
  s.tick(6_000);
  await s.silent('n1', lastSeen, 6_000);
  const moment = lastSeen + 13_000;
  for (const grace of [undefined, 1_000, 6_000, 60_000, 3_600_000]) {
    const r = await stateAsOf(store, 'n1', at(moment), grace);
    assert.equal(r.state.liveness.state, 'disconnected', `reader grace ${grace}`);
    assert.equal(r.state.liveness.lastSeenAt, new Date(lastSeen).toISOString());
    assert.equal(r.state.liveness.disconnectedForMs, 13_000);
    // Between hearing and the silence the record says connected, even long past the reader's grace.
    const during = await stateAsOf(store, 'n1', at(lastSeen + 5_000), 1_000);
    assert.equal(during.state.liveness.state, 'connected');
  }
  const readModel = createReadModel();
  const fleet = createFleetHistory({ store, readModel, graceMs: 3_600_000 });
  readModel.apply(await readAll(store));
  assert.equal((await fleet.at(at(moment))).byLiveness.disconnected, 1);
  assert.equal((await fleet.at(at(lastSeen + 5_000))).byLiveness.connected, 1);
});

test('as of a moment no engine observed, liveness is not-observed: never connected or disconnected', async () => {
  const store = createMemoryEventStore();
  const s = historyInStore(store);
  const t0 = s.now().getTime();
  await recordObservation(store, started('e1', t0, 6_000, null));
  await s.heard('n1');
  s.tick(10_000);
  await recordObservation(store, stopped('e1', s.now().getTime()));
  const stoppedAt = s.now().getTime();
  s.tick(60_000);
  // A second engine starts and then crashes: its next start says it was last known good at +5 s.
  const second = s.now().getTime();
  await recordObservation(store, started('e2', second, 6_000, null));
  s.tick(30_000);
  await recordObservation(store, started('e2', s.now().getTime(), 6_000, second + 5_000));
  const readModel = createReadModel();
  const fleet = createFleetHistory({ store, readModel, graceMs: 60_000 });
  readModel.apply(await readAll(store));
  const cases: [number, string][] = [
    [t0 + 5_000, 'connected'],
    [stoppedAt + 30_000, 'not-observed'],
    [second + 1_000, 'connected'],
    [second + 20_000, 'not-observed'],
    [s.now().getTime() + 1_000, 'connected'],
  ];
  for (const [t, want] of cases) {
    assert.equal((await stateAsOf(store, 'n1', at(t))).state.liveness.state, want, new Date(t).toISOString());
    const byLiveness = (await fleet.at(at(t))).byLiveness as Record<string, number>;
    assert.equal(byLiveness[want], 1, `fleet as of ${new Date(t).toISOString()}`);
  }
});

test('engines sharing a store each observe their own span: one stopping leaves the moments the other watched observed', async () => {
  const store = createMemoryEventStore();
  const s = historyInStore(store);
  const t0 = s.now().getTime();
  await recordObservation(store, started('a', t0, 6_000, null));
  await s.heard('n1');
  s.tick(1_000);
  // b starts while a runs: not a crash of a.
  await recordObservation(store, started('b', t0 + 1_000, 6_000, null));
  s.tick(10_000);
  await recordObservation(store, stopped('a', t0 + 11_000));
  s.tick(10_000);
  await recordObservation(store, stopped('b', t0 + 21_000));
  s.tick(10_000);
  const cases: [number, string][] = [
    [t0 + 500, 'connected'],
    [t0 + 15_000, 'connected'],
    [t0 + 25_000, 'not-observed'],
  ];
  for (const [t, want] of cases) assert.equal((await stateAsOf(store, 'n1', at(t))).state.liveness.state, want, new Date(t).toISOString());
});

test('the timeline marks a NodeHeard that ends a recorded silence with how long the node was silent, whatever grace the reader has', async () => {
  const store = createMemoryEventStore();
  const s = historyInStore(store);
  const t0 = s.now().getTime();
  await s.heard('n1');
  s.tick(10_000);
  await s.silent('n1', t0 + 4_000, 6_000);
  s.tick(50_000);
  await s.heard('n1', t0 + 4_000);
  const entries = describeTimeline('n1', await store.readStream(streamOf('n1')), 600_000);
  assert.deepEqual(
    entries.map((e) => [e.type, e.silentForMs]),
    [
      ['NodeHeard', null],
      ['NodeSilent', null],
      ['NodeHeard', 56_000],
    ],
  );
});
