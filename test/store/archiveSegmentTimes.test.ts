import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import type { At } from '../../projections/index.ts';
import { makeAliveSeen, makeNodeHeard, makeNodeSilent, streamOf } from '../../src/core/events/index.ts';
import type { ConvergeEvent, WithId } from '../../src/core/events/index.ts';
import { stateAsOf } from '../../src/readModel/queries.ts';
import type { StateAsOf } from '../../src/readModel/queries.ts';
import { withArchive } from '../../src/store/archive/withArchive.ts';
import type { EventStore } from '../../src/store/port.ts';
import { archiveSqliteStore } from '../../src/store/sqlite/sqliteArchive.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';

// The segments' time ranges (docs/store.md "Segment time ranges"): a read as of a moment leaves out
// the segments past it, and answers exactly as a read of every segment and as the store before any
// move did, with the clock stepping back now and then, and segments archived with no range.

const dir = mkdtempSync(join(tmpdir(), 'converge-segment-times-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const dayMs = 86_400_000;

/** A small seeded PRNG: the same history every run. */
function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Fleet = { nodes: string[]; head: bigint; start: number; end: number };

/**
 * 20 nodes over 120 days to about a week ago: alives, silences and comebacks interleaved at random;
 * with `stepBack`, now and then the clock steps back by up to two days (an engine's clock, or a
 * second engine appending).
 */
async function randomFleet(path: string, seed: number, stepBack: boolean): Promise<Fleet> {
  const store = createSqliteEventStore(path, { synchronous: 'NORMAL' });
  const rand = prng(seed);
  const nodes = Array.from({ length: 20 }, (_, i) => `n${i}`);
  const start = Date.now() - 120 * dayMs;
  let t = start;
  let end = t;
  for (let i = 0; i < 800; i++) {
    t += 60_000 + Math.floor(rand() * 3 * 3_600_000);
    if (stepBack && rand() < 0.02) t -= Math.floor(rand() * 2 * dayMs);
    end = Math.max(end, t);
    const node = nodes[Math.floor(rand() * rand() * nodes.length)]!;
    const k = rand();
    const e: WithId<ConvergeEvent> =
      k < 0.7 ? makeAliveSeen({ node }, t) : k < 0.85 ? makeNodeSilent(node, t - 90_000, t, 60_000) : makeNodeHeard(node, t, t - 600_000);
    await store.append([{ stream: streamOf(node), expected: 'any', events: [e] }]);
  }
  const head = (await store.headPosition())!;
  await store.close();
  return { nodes, head, start, end };
}

/** The same store with no time ranges in its manifest: every segment its filter allows is opened. */
function untimed(store: EventStore): EventStore {
  const manifest = store.archiveManifest!.bind(store);
  store.archiveManifest = async () => {
    const m = await manifest();
    return { ...m, segments: m.segments.map(({ minTime: _a, maxTime: _b, ...s }) => s) };
  };
  return store;
}

/** Moments to read as of: times across the history and past both ends, positions too. */
function moments(f: Fleet, rand: () => number): At[] {
  const times = [f.start - dayMs, f.end + dayMs, ...Array.from({ length: 16 }, () => f.start + rand() * (f.end - f.start))];
  const positions = Array.from({ length: 6 }, () => BigInt(Math.floor(rand() * Number(f.head))));
  return [
    ...times.map((time): At => ({ kind: 'time', time, iso: new Date(time).toISOString() })),
    ...positions.map((position): At => ({ kind: 'position', position })),
  ];
}

async function answers(store: EventStore, nodes: readonly string[], at: readonly At[]): Promise<(StateAsOf | string)[]> {
  const out: (StateAsOf | string)[] = [];
  try {
    for (const m of at)
      for (const n of nodes) {
        try {
          out.push(await stateAsOf(store, n, m, 60_000));
        } catch (err) {
          out.push((err as Error).message);
        }
      }
  } finally {
    await store.close();
  }
  return out;
}

const archived = (path: string, archive: string, onOpen?: (f: string) => void): Promise<EventStore> =>
  withArchive(createSqliteEventStore(path), archive, onOpen === undefined ? {} : { onOpen });

for (const seed of [1, 2, 3]) {
  test(`seed ${seed}: state as of many moments is the same with the time ranges, without them, and before any move`, async () => {
    const path = join(dir, `fleet-${seed}.db`);
    const archive = join(dir, `archive-${seed}`);
    const f = await randomFleet(path, seed, true);
    const at = moments(f, prng(seed * 31));
    const nodes = [...f.nodes, 'never-seen'];
    const original = await answers(createSqliteEventStore(path), nodes, at);
    const cutoff = (days: number): string => new Date(Date.now() - days * dayMs).toISOString();
    // The release before's run: segments with no time range (it does not know the table).
    const middle = new Date((f.start + f.end) / 2).toISOString();
    const first = await archiveSqliteStore(path, { dir: archive, before: middle, belowPosition: f.head, segmentEvents: 29 });
    const db = new Database(path);
    db.exec('DELETE FROM archive_segment_times');
    db.close();
    const second = await archiveSqliteStore(path, { dir: archive, before: cutoff(0), belowPosition: f.head, segmentEvents: 29 });
    assert.ok(first.segments.length >= 3 && second.segments.length >= 5, `${first.segments.length} + ${second.segments.length} segments`);

    const plain = await answers(await withArchive(untimed(createSqliteEventStore(path)), archive), nodes, at);
    assert.deepEqual(plain, original, 'the archive read whole answers as the store did');
    assert.deepEqual(await answers(await archived(path, archive), nodes, at), original, 'segments with no range opened');
    // The next run fills in the missing ranges; the answers stay.
    await archiveSqliteStore(path, { dir: archive, before: cutoff(0), belowPosition: f.head, segmentEvents: 29 });
    const store = createSqliteEventStore(path);
    const manifest = await store.archiveManifest!();
    await store.close();
    assert.ok(
      manifest.segments.every((s) => s.minTime !== undefined && s.maxTime !== undefined && s.minTime <= s.maxTime),
      'every segment has its range',
    );
    assert.deepEqual(await answers(await archived(path, archive), nodes, at), original, 'every segment with its range');
  });
}

test('a read as of T opens no segment whose events are all after T, and those before it are still read', async () => {
  const path = join(dir, 'steady.db');
  const archive = join(dir, 'steady-archive');
  const f = await randomFleet(path, 9, false);
  const r = await archiveSqliteStore(path, { dir: archive, before: new Date().toISOString(), belowPosition: f.head, segmentEvents: 20 });
  assert.ok(r.segments.length >= 20, `${r.segments.length} segments`);
  const store = createSqliteEventStore(path);
  const manifest = await store.archiveManifest!();
  await store.close();
  const range = new Map(manifest.segments.map((s) => [s.file, s]));

  let skipped = 0;
  for (const frac of [0.1, 0.3, 0.5, 0.8]) {
    const time = f.start + frac * (f.end - f.start);
    const at: At = { kind: 'time', time, iso: new Date(time).toISOString() };
    for (const node of ['n0', 'n1', 'n2']) {
      const opened: string[] = [];
      const timed = await archived(path, archive, (file) => opened.push(file));
      const all: string[] = [];
      const whole = await withArchive(untimed(createSqliteEventStore(path)), archive, { onOpen: (file) => all.push(file) });
      try {
        assert.deepEqual(await stateAsOf(timed, node, at), await stateAsOf(whole, node, at));
        for (const file of opened) assert.ok(range.get(file)!.minTime! <= time, `${file} starts after the moment, yet was opened`);
        const held = all.filter((file) => range.get(file)!.minTime! <= time);
        assert.deepEqual(opened, held, 'the segments that start by the moment are all opened');
        skipped += all.length - opened.length;
      } finally {
        await timed.close();
        await whole.close();
      }
    }
  }
  assert.ok(skipped > 20, `${skipped} segments left unopened`);
});

test('a clock stepped back: segments after the moment are read when a later event, archived or hot, is within it', async () => {
  const path = join(dir, 'stepped.db');
  const archive = join(dir, 'stepped-archive');
  const store = createSqliteEventStore(path, { synchronous: 'NORMAL' });
  const day0 = Date.now() - 100 * dayMs;
  const at = (day: number, node: string): Promise<unknown> =>
    store.append([{ stream: streamOf(node), expected: 'any', events: [makeAliveSeen({ node }, day0 + day * dayMs)] }]);
  for (let d = 0; d < 10; d++) for (const n of ['a', 'c']) await at(d, n);
  // The clock runs forty days ahead, then is set right: `a` gets one more event after it
  // (so its day-11 event is archived), `c` none (its day-11 event stays hot as its last).
  for (let d = 50; d < 60; d += 0.5) for (const n of ['a', 'c']) await at(d, n);
  await at(11, 'a');
  await at(11, 'c');
  await at(60, 'a');
  const head = (await store.headPosition())!;
  await store.close();
  const moment: At = { kind: 'time', time: day0 + 12 * dayMs, iso: new Date(day0 + 12 * dayMs).toISOString() };
  const original = await answers(createSqliteEventStore(path), ['a', 'c'], [moment]);
  const r = await archiveSqliteStore(path, { dir: archive, before: new Date().toISOString(), belowPosition: head + 1n, segmentEvents: 5 });
  assert.ok(r.segments.length >= 10, `${r.segments.length} segments`);
  assert.deepEqual(await answers(await archived(path, archive), ['a', 'c'], [moment]), original);
  assert.equal((original[0] as StateAsOf).folded, 31, 'a: everything up to its day-11 event, the days ahead included');
  assert.equal((original[1] as StateAsOf).folded, 31, 'c: everything up to its last event');
});
