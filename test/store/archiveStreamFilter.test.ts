import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import { streamOf } from '../../src/core/events/index.ts';
import { buildStreamFilter, bucketOf, filterBuckets, partMayHold } from '../../src/store/archive/streamFilter.ts';
import { withArchive } from '../../src/store/archive/withArchive.ts';
import { archiveSqliteStore } from '../../src/store/sqlite/sqliteArchive.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { randomFleet, streams, unfiltered } from '../support/randomArchiveFleet.ts';

// The segments' stream filters (docs/operations.md "Retention and archive"): a read of one stream
// skips the segments whose filter rules it out, and gives exactly the events an unfiltered read
// gives, segments archived before the filters existed included.

const dir = mkdtempSync(join(tmpdir(), 'converge-stream-filter-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('the filter holds every stream put in it and rules out nearly all others', () => {
  const held = Array.from({ length: 10_000 }, (_, i) => `node-h${i}`);
  const parts = buildStreamFilter(held);
  assert.equal(parts.length, filterBuckets);
  for (const s of held) assert.ok(partMayHold(parts[bucketOf(s)]!, s), `${s} is held`);
  let falsePositives = 0;
  const absent = 20_000;
  for (let i = 0; i < absent; i++) if (partMayHold(parts[bucketOf(`node-a${i}`)]!, `node-a${i}`)) falsePositives++;
  // 10 bits a stream, 7 probes: about 0.8 % in theory.
  assert.ok(falsePositives / absent < 0.02, `false positives ${falsePositives} of ${absent}`);
  const empty = buildStreamFilter([]);
  assert.equal(partMayHold(empty[bucketOf('node-x')]!, 'node-x'), false, 'an empty filter holds nothing');
  assert.equal(partMayHold(Buffer.from([99, 0, 0]), 'node-x'), true, 'a part of an unknown version is read as "may hold"');
});

for (const seed of [1, 2, 3]) {
  test(`seed ${seed}: a filtered read gives exactly the unfiltered read's events, segments from before v8 included`, async () => {
    const path = join(dir, `fleet-${seed}.db`);
    const archive = join(dir, `archive-${seed}`);
    const { nodes, head } = await randomFleet(createSqliteEventStore(path), seed);
    const before = await streams(createSqliteEventStore(path), nodes);
    const cutoff = (days: number): string => new Date(Date.now() - days * 86_400_000).toISOString();
    // The older Converge's run: its segments, then the store taken back to v7 (no filters).
    const first = await archiveSqliteStore(path, { dir: archive, before: cutoff(60), belowPosition: head, segmentEvents: 37 });
    const db = new Database(path);
    db.exec('DROP TABLE archive_stream_filter');
    db.pragma('user_version = 7');
    db.close();
    const second = await archiveSqliteStore(path, { dir: archive, before: cutoff(0), belowPosition: head, segmentEvents: 37 });
    assert.ok(first.segments.length >= 3 && second.segments.length >= 5, `${first.segments.length} + ${second.segments.length} segments`);

    const opened: string[] = [];
    const filtered = await streams(await withArchive(createSqliteEventStore(path), archive, { onOpen: (f) => opened.push(f) }), nodes);
    const plain = await streams(await withArchive(unfiltered(createSqliteEventStore(path)), archive), nodes);
    assert.deepEqual(filtered, plain);
    assert.deepEqual(filtered, before, 'and the events the store held before any move');
    for (const f of first.segments) assert.ok(opened.includes(f), `${f}, from before v8, is opened`);
    assert.ok(new Set(opened).size === first.segments.length + second.segments.length, 'each segment opened once at most');

    // The next run gives the segments from before v8 their filters: then they are skipped too, and the answers stay.
    await archiveSqliteStore(path, { dir: archive, before: cutoff(0), belowPosition: head, segmentEvents: 37 });
    const late: string[] = [];
    const refilled = await withArchive(createSqliteEventStore(path), archive, { onOpen: (f) => late.push(f) });
    assert.deepEqual(await refilled.readStream(streamOf('never-seen')), []);
    assert.deepEqual(late, [], 'no segment opened for a stream none holds');
    await refilled.close();
    assert.deepEqual(await streams(await withArchive(createSqliteEventStore(path), archive), nodes), before);
  });
}

test('a read of a stream no segment holds opens no segment; a second read reopens none', async () => {
  const path = join(dir, 'absent.db');
  const archive = join(dir, 'absent-archive');
  const { head } = await randomFleet(createSqliteEventStore(path), 9);
  const r = await archiveSqliteStore(path, { dir: archive, before: new Date().toISOString(), belowPosition: head, segmentEvents: 50 });
  assert.ok(r.segments.length >= 10, `${r.segments.length} segments`);

  const opened: string[] = [];
  const store = await withArchive(createSqliteEventStore(path), archive, { onOpen: (f) => opened.push(f) });
  try {
    assert.deepEqual(await store.readStream(streamOf('never-seen')), []);
    assert.deepEqual(await store.readStream('observations'), []);
    assert.deepEqual(opened, [], 'no segment opened for a stream none holds');
    const solo = await store.readStream(streamOf('solo3'));
    assert.equal(solo.length, 3);
    const once = opened.length;
    assert.ok(once >= 1 && once <= 2, `solo3's archived events lie in one segment, ${once} opened (a false positive may add one)`);
    await store.readStream(streamOf('n0'));
    const afterN0 = opened.length;
    await store.readStream(streamOf('n1'));
    await store.readStream(streamOf('n0'));
    assert.equal(new Set(opened).size, opened.length, 'a segment opened once is not opened again');
    assert.ok(afterN0 > once);
  } finally {
    await store.close();
  }

  // The same reads with no filter: the hook does count, every segment is opened.
  const all: string[] = [];
  const plain = await withArchive(unfiltered(createSqliteEventStore(path)), archive, { onOpen: (f) => all.push(f) });
  try {
    assert.deepEqual(await plain.readStream(streamOf('never-seen')), []);
    assert.equal(all.length, r.segments.length);
  } finally {
    await plain.close();
  }
});

test('a view made after another segment was archived takes over the block tables the last view read', async () => {
  const path = join(dir, 'previous.db');
  const archive = join(dir, 'previous-archive');
  const { head } = await randomFleet(createSqliteEventStore(path), 5);
  const cutoff = (days: number): string => new Date(Date.now() - days * 86_400_000).toISOString();
  const before = await streams(createSqliteEventStore(path), ['n0', 'n1']);
  const first = await archiveSqliteStore(path, { dir: archive, before: cutoff(60), belowPosition: head, segmentEvents: 50 });

  const opened: string[] = [];
  const one = await withArchive(createSqliteEventStore(path), archive, { onOpen: (f) => opened.push(f) });
  const n0 = await one.readStream(streamOf('n0'));
  assert.ok(opened.length > 0 && opened.every((f) => first.segments.includes(f)));
  const second = await archiveSqliteStore(path, { dir: archive, before: cutoff(0), belowPosition: head, segmentEvents: 50 });
  assert.ok(second.segments.length > 0);

  const reopened: string[] = [];
  const two = await withArchive(createSqliteEventStore(path), archive, { onOpen: (f) => reopened.push(f), previous: one.archive });
  try {
    assert.deepEqual(await two.readStream(streamOf('n0')), before.get('n0'), 'the same events, the later segments included');
    assert.deepEqual(n0, before.get('n0'), 'and the first view gave them too');
    assert.ok(reopened.length > 0, 'n0 is in the new segments too');
    assert.deepEqual(
      reopened.filter((f) => opened.includes(f)),
      [],
      'no segment the last view opened is opened again',
    );
    assert.deepEqual(await two.readStream(streamOf('n1')), before.get('n1'));
  } finally {
    await one.close();
    await two.close();
  }
});
