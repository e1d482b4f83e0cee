import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createFleetFold, eventTime, summarizeFleet } from '../../projections/index.ts';
import type { At, FleetSummaryOptions } from '../../projections/index.ts';
import type { Recorded } from '../../src/core/events/index.ts';
import { createFleetHistory } from '../../src/readModel/fleetHistory.ts';
import { stateAsOf } from '../../src/readModel/queries.ts';
import { createReadModel } from '../../src/readModel/readModel.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { historyInStore } from '../support/history.ts';

// GET /v1/fleet?at= answers from a compact history kept as the read model folds; it must say
// exactly what folding the store up to that moment and summarising would (docs/design.md §3: "as of"
// is the same fold, stopped).

const graceMs = 60_000;

/** A small deterministic PRNG, so a failure names its seed. */
const rng = (seed: number) => () => {
  seed = (seed * 1_103_515_245 + 12_345) & 0x7fffffff;
  return seed / 0x80000000;
};

/** Random sends (three specs), matching/stale/unknown/legacy reports, alives, retirements and silences across a few nodes. */
async function randomHistory(store: EventStore, seed: number, steps: number, stepsBack = false): Promise<void> {
  const r = rng(seed);
  const s = historyInStore(store);
  const nodes = ['a', 'b', 'c', 'd', 'e', 'f'];
  for (let i = 0; i < steps; i++) {
    const node = nodes[Math.floor(r() * nodes.length)]!;
    const x = r();
    if (x < 0.2) await s.send(node, [{ id: 'web', image: `v${Math.floor(r() * 3)}` }, ...(r() < 0.3 ? [{ id: 'db' }] : [])]);
    else if (x < 0.5) {
      const sent = s.digests(node);
      const y = r();
      const declared =
        sent.length === 0 || y < 0.1 ? null : y < 0.2 ? 'f'.repeat(64) : y < 0.4 ? sent[Math.floor(r() * sent.length)]! : sent.at(-1)!;
      await s.report(node, {
        declared,
        applied: r() < 0.8 ? ['web'] : [],
        ...(r() < 0.1 ? { failed: { db: 'boom' } } : {}),
        ...(r() < 0.05 ? { refused: 'policy' } : {}),
      });
    } else if (x < 0.77) await s.alive(node);
    else if (x < 0.8) await s.retire(node);
    s.tick(r() < 0.1 ? 70_000 + Math.floor(r() * 200_000) : Math.floor(r() * 20_000));
    // The engine's clock stepped back (an NTP correction): later events carry earlier times.
    if (stepsBack && r() < 0.03) s.tick(-Math.floor(r() * 600_000));
  }
}

async function readAll(store: EventStore): Promise<Recorded[]> {
  const out: Recorded[] = [];
  for await (const batch of store.readAll({ streamPrefix: 'node-' })) out.push(...batch);
  return out;
}

function expected(events: readonly Recorded[], at: At, moment: number, options: FleetSummaryOptions = {}) {
  const fold = createFleetFold(at);
  for (const e of events) fold.push(e);
  return summarizeFleet(fold.states().values(), moment, graceMs, options);
}

/** A random history in a store, folded by a read model with the fleet's history recorded from the start. */
async function recorded(seed: number, steps: number, stepsBack = false) {
  const store = createMemoryEventStore();
  await randomHistory(store, seed, steps, stepsBack);
  const events = await readAll(store);
  const readModel = createReadModel();
  const history = createFleetHistory({ store, readModel, graceMs });
  readModel.apply(events);
  return { events, readModel, history };
}

const strip = <T extends { position: unknown; moment: unknown }>(x: T): Omit<T, 'position' | 'moment'> => {
  const { position: _p, moment: _m, ...rest } = x;
  return rest;
};

async function checkEveryMoment(
  events: readonly Recorded[],
  asOf: (at: At) => Promise<{ position: string | null; moment: string | null }>,
) {
  for (const e of events) {
    const at: At = { kind: 'position', position: e.position };
    const got = await asOf(at);
    assert.equal(got.position, e.position.toString());
    assert.ok(got.moment !== null);
    // The moment of a position is the time of its last event, to the second (a sample per second is kept).
    const moment = Date.parse(got.moment);
    const truth = Date.parse(eventTime(e));
    assert.ok(moment <= truth && truth - moment < 1_000, `moment ${got.moment} for an event at ${eventTime(e)}`);
    assert.deepEqual(strip(got as never), expected(events, at, moment), `as of position ${e.position}`);

    const time = Date.parse(eventTime(e)) + 500;
    const byTime: At = { kind: 'time', time, iso: new Date(time).toISOString() };
    const gotByTime = await asOf(byTime);
    assert.equal(gotByTime.moment, byTime.iso);
    assert.deepEqual(strip(gotByTime as never), expected(events, byTime, time), `as of ${byTime.iso}`);
  }
}

for (const seed of [1, 7, 42]) {
  test(`the fleet as of every position and time equals the store folded up to it and summarised (seed ${seed})`, async () => {
    const { events, history } = await recorded(seed, 300);
    await checkEveryMoment(events, (at) => history.at(at));
    const stats = history.stats();
    assert.equal(stats.complete, true);
    // Alives that only extend a presence interval add no row: the history is smaller than the store.
    assert.ok(stats.rows < events.length, `${stats.rows} rows for ${events.length} events`);
  });
}

test('a read model restored from a snapshot answers the same, after folding the earlier part of the store once', async () => {
  const store = createMemoryEventStore();
  await randomHistory(store, 99, 200);
  const events = await readAll(store);
  const half = events[Math.floor(events.length / 2)]!.position;
  // What a snapshot restore leaves: states up to `half`, the history created before the rest folds.
  const warm = createReadModel();
  warm.apply(events.filter((e) => e.position <= half));
  const readModel = createReadModel();
  readModel.restore(warm.nodes(), half);
  const history = createFleetHistory({ store, readModel, graceMs });
  readModel.apply(events.filter((e) => e.position > half));
  assert.equal(history.stats().complete, null);
  await checkEveryMoment(events, (at) => history.at(at));
  assert.equal(history.stats().complete, true);
});

test('before the first event the fleet is empty, and after the last it is the fleet now', async () => {
  const { events, readModel, history } = await recorded(3, 50);
  const before = await history.at({ kind: 'time', time: 0, iso: new Date(0).toISOString() });
  assert.equal(before.nodes, 0);
  assert.equal(before.position, null);
  const last = events.at(-1)!;
  const after = await history.at({ kind: 'position', position: last.position + 1000n });
  assert.equal(after.position, last.position.toString());
  assert.deepEqual(strip(after), summarizeFleet(readModel.nodes(), Date.parse(after.moment!), graceMs));
});

test('with fewer cohorts listed than the fleet has, "as of" and "now" rank and sum the rest alike', async () => {
  const { events, history } = await recorded(11, 300);
  for (const topCohorts of [0, 1, 2]) {
    for (const e of events.filter((_, i) => i % 25 === 24)) {
      const at: At = { kind: 'position', position: e.position };
      const got = await history.at(at, { topCohorts });
      const moment = Date.parse(got.moment!);
      const fold = createFleetFold(at);
      for (const x of events) fold.push(x);
      assert.deepEqual(
        strip(got),
        summarizeFleet(fold.states().values(), moment, graceMs, { topCohorts }),
        `top ${topCohorts} at ${e.position}`,
      );
    }
    const last = await history.at({ kind: 'position', position: events.at(-1)!.position }, { topCohorts });
    assert.equal(last.cohorts.length, topCohorts);
    assert.ok(last.otherCohorts.cohorts > 0, 'some cohorts are summed, not listed');
  }
});

for (const seed of [3, 19]) {
  test(`the fleet as of a time equals the store folded to it when the clock stepped back (seed ${seed})`, async () => {
    const { events, history } = await recorded(seed, 300, true);
    const stamped = events.map((e) => Date.parse(eventTime(e)));
    assert.ok(
      stamped.some((t, i) => i > 0 && t < stamped[i - 1]!),
      'the history has an event stamped before the one it follows',
    );
    for (const e of events) {
      const time = Date.parse(eventTime(e)) + 500;
      const byTime: At = { kind: 'time', time, iso: new Date(time).toISOString() };
      // Liveness as of a time is read from sightings (presence intervals), which the liveness code
      // owns and this rule does not change: compared here are the node states the fold gives.
      const { byLiveness: _got, ...got } = strip(await history.at(byTime));
      const { byLiveness: _want, ...want } = expected(events, byTime, time);
      assert.deepEqual(got, want, `as of ${byTime.iso}`);
    }
  });
}

// A NodeSilent is recorded when the engine observed the silence: from that moment on the node is
// disconnected, in the fleet as of it as in the node's own state as of it (docs/design.md §3).
test('at the moment a silence was observed, fleet?at= says disconnected as state?at= does', async () => {
  const store = createMemoryEventStore();
  const s = historyInStore(store);
  const readModel = createReadModel();
  const history = createFleetHistory({ store, readModel, graceMs });
  await s.heard('a');
  s.tick(5_000);
  const lastSeen = s.now().getTime();
  s.tick(graceMs);
  await s.silent('a', lastSeen, graceMs);
  const observedAt = s.now().getTime();
  readModel.apply(await readAll(store));
  for (const [time, want] of [
    [observedAt - 1, 'connected'],
    [observedAt, 'disconnected'],
    [observedAt + 1, 'disconnected'],
  ] as const) {
    const at: At = { kind: 'time', time, iso: new Date(time).toISOString() };
    const fleet = (await history.at(at)) as { byLiveness: Record<string, number> };
    const node = await stateAsOf(store, 'a', at);
    assert.equal(node.state.liveness.state, want, `state as of ${at.iso}`);
    assert.equal(fleet.byLiveness[want], 1, `fleet as of ${at.iso}: ${JSON.stringify(fleet.byLiveness)}`);
  }
});
