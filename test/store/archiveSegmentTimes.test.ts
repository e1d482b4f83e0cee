import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import type { At } from '../../projections/index.ts';
import { makeAliveSeen, streamOf } from '../../src/core/events/index.ts';
import { stateAsOf } from '../../src/readModel/queries.ts';
import type { StateAsOf } from '../../src/readModel/queries.ts';
import { withArchive } from '../../src/store/archive/withArchive.ts';
import type { EventStore } from '../../src/store/port.ts';
import { archiveSqliteStore } from '../../src/store/sqlite/sqliteArchive.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { prng } from '../support/prng.ts';
import { answers, dayMs, moments, randomFleet, untimed } from '../support/steppedFleet.ts';

// The segments' time ranges (docs/store.md "Segment time ranges"): a read as of a moment leaves out
// the segments past it, and answers exactly as a read of every segment and as the store before any
// move did, with the clock stepping back now and then, and segments archived with no range.

const dir = mkdtempSync(join(tmpdir(), 'converge-segment-times-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const archived = (path: string, archive: string, onOpen?: (f: string) => void): Promise<EventStore> =>
  withArchive(createSqliteEventStore(path), archive, onOpen === undefined ? {} : { onOpen });

for (const seed of [1, 2, 3]) {
  test(`seed ${seed}: state as of many moments is the same with the time ranges, without them, and before any move`, async () => {
    const path = join(dir, `fleet-${seed}.db`);
    const archive = join(dir, `archive-${seed}`);
    const f = await randomFleet(createSqliteEventStore(path, { synchronous: 'NORMAL' }), seed, true);
    const at = moments(f, prng(seed * 31));
    const nodes = [...f.nodes, 'never-seen'];
    const original = await answers(createSqliteEventStore(path), nodes, at);
    const cutoff = (days: number): string => new Date(Date.now() - days * dayMs).toISOString();
    const middle = new Date((f.start + f.end) / 2).toISOString();
    const first = await archiveSqliteStore(path, { dir: archive, before: middle, belowPosition: f.head, segmentEvents: 29 });
    const second = await archiveSqliteStore(path, { dir: archive, before: cutoff(0), belowPosition: f.head, segmentEvents: 29 });
    assert.ok(first.segments.length >= 3 && second.segments.length >= 5, `${first.segments.length} + ${second.segments.length} segments`);
    // The first run's segments as the release before leaves them: no time range.
    const db = new Database(path);
    const forget = db.prepare('DELETE FROM archive_segment_times WHERE file = ?');
    for (const file of first.segments) assert.equal(forget.run(file).changes, 1);
    db.close();

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
  const f = await randomFleet(createSqliteEventStore(path, { synchronous: 'NORMAL' }), 9, false);
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
