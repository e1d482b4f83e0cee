import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import { createArchiveReader } from '../../src/store/archive/archiveReader.ts';
import { SegmentError, encodeSegment, openSegment, readSegmentFile, writeSegmentFile } from '../../src/store/archive/segment.ts';
import type { ArchivedRow } from '../../src/store/archive/segment.ts';
import { encodeSegmentV1 } from '../../src/store/archive/segmentV1.ts';
import { withArchive } from '../../src/store/archive/withArchive.ts';
import { archiveSqliteStore } from '../../src/store/sqlite/sqliteArchive.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import type { EventStore } from '../../src/store/port.ts';
import { archivableFleet, dayMs } from '../support/archivableFleet.ts';

// Archive segments (docs/operations.md "Retention and archive"): v2 files are blocks compressed one
// by one with a block table in a plain header, so one stream's read decompresses only its blocks;
// v1 files (one brotli stream), which stores archived before v2 hold, are still read.

const dir = mkdtempSync(join(tmpdir(), 'converge-segment-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** 600 rows over 12 streams, in position order, the streams interleaved as a log's are. */
const rows: ArchivedRow[] = Array.from({ length: 600 }, (_, i) => ({
  position: BigInt(10 + i * 2),
  id: `id-${i}`,
  stream: `node-n${String(i % 12).padStart(2, '0')}`,
  revision: BigInt(Math.floor(i / 12)),
  type: 'AliveSeen',
  data: JSON.stringify({ node: `n${i % 12}`, seenAt: new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString(), pad: 'x'.repeat(i % 50) }),
  metadata: '{"v":1}',
  time: new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString(),
  leaf: (i % 256).toString(16).padStart(2, '0').repeat(32),
}));

test('v2: rows come back in position order; a stream is read from its own blocks only', async () => {
  const seg = await encodeSegment('store-1', rows, 4096);
  const header = seg.header as typeof seg.header & { blocks: { first: string; last: string; offset: number; bytes: number }[] };
  assert.equal(header.version, 2);
  assert.ok(header.blocks.length >= 6, `several blocks (${header.blocks.length})`);
  assert.match(seg.bytes.subarray(0, 60).toString(), /^\{"format":"converge-archive-segment","version":2,/, 'the header is plain JSON');
  const sub = join(dir, 'v2');
  mkdirSync(sub);
  const path = await writeSegmentFile(sub, seg);
  const expect = { sha256: seg.header.sha256, count: rows.length };
  assert.deepEqual(readSegmentFile(path, seg.name, expect).rows, rows);
  const f = openSegment(path, seg.name, expect);
  assert.deepEqual(
    f.streamRows('node-n03'),
    rows.filter((r) => r.stream === 'node-n03'),
  );
  assert.deepEqual(f.streamRows('node-zz'), []);

  // Spoil a block that holds no row of node-n00: its read still answers, a whole read names the damage.
  const other = header.blocks.find((b) => b.first > 'node-n00')!;
  const bytes = readFileSync(path);
  const start = bytes.indexOf(10) + 1;
  bytes[start + other.offset + Math.floor(other.bytes / 2)]! ^= 0xff;
  writeFileSync(path, bytes);
  const spoiled = openSegment(path, seg.name, expect);
  assert.deepEqual(
    spoiled.streamRows('node-n00'),
    rows.filter((r) => r.stream === 'node-n00'),
  );
  assert.throws(
    () => spoiled.rows(),
    (err: unknown) => err instanceof SegmentError && err.problem === 'changed',
  );
  assert.throws(
    () => openSegment(path, seg.name, { sha256: 'f'.repeat(64), count: rows.length }),
    /the store's manifest says/,
    'a block table that is not the manifest sha256 is refused',
  );
});

test('v1 and v2 segments side by side: the reader answers by stream and in position order from both', async () => {
  const sub = join(dir, 'mixed');
  mkdirSync(sub);
  const v1 = encodeSegmentV1('store-1', rows.slice(0, 300));
  const v2 = await encodeSegment('store-1', rows.slice(300), 4096);
  await writeSegmentFile(sub, v1);
  await writeSegmentFile(sub, v2);
  const segment = (s: typeof v1, n: number) => ({
    file: s.name,
    from: BigInt(s.header.from),
    to: BigInt(s.header.to),
    events: n,
    sha256: s.header.sha256,
    bytes: s.bytes.length,
    rawBytes: s.rawBytes,
  });
  const reader = createArchiveReader(sub, { store: 'store-1', segments: [segment(v1, 300), segment(v2, 300)] });
  assert.deepEqual(
    reader.streamRows('node-n05'),
    rows.filter((r) => r.stream === 'node-n05'),
  );
  assert.deepEqual(reader.rowsAfter(0n, 10_000), rows);
  assert.deepEqual(reader.check(), []);
});

test('a store archived in format v1 reads as before once a later run adds v2 segments', async () => {
  const path = join(dir, 'fleet.db');
  const archive = join(dir, 'fleet-archive');
  const { snapshotPosition } = await archivableFleet(path);
  const before = await everything(createSqliteEventStore(path));
  const cutoff = (days: number) => new Date(Date.now() - days * dayMs).toISOString();
  // The older Converge's run: its segments rewritten as v1, the manifest's sha256 theirs.
  await archiveSqliteStore(path, { dir: archive, before: cutoff(60), belowPosition: snapshotPosition });
  const db = new Database(path);
  for (const { file } of db.prepare('SELECT file FROM archive_segments').all() as { file: string }[]) {
    const v1 = encodeSegmentV1(
      db.prepare('SELECT identity FROM store_identity').pluck().get() as string,
      readSegmentFile(join(archive, file), file).rows,
    );
    await writeSegmentFile(archive, v1);
    db.prepare('UPDATE archive_segments SET sha256 = ?, bytes = ? WHERE file = ?').run(v1.header.sha256, v1.bytes.length, file);
  }
  db.close();
  const r = await archiveSqliteStore(path, { dir: archive, before: cutoff(30), belowPosition: snapshotPosition });
  assert.ok(r.events > 0, 'the later run moved more, as v2');
  const merged = await withArchive(createSqliteEventStore(path), archive);
  assert.deepEqual(await everything(merged), before);
});

/** Every event, and each node's stream, as the store answers. */
async function everything(store: EventStore): Promise<unknown> {
  try {
    const all = [];
    for await (const b of store.readAll()) all.push(...b);
    const streams = [];
    for (const n of ['n1', 'n2', 'n3']) streams.push(await store.readStream(`node-${n}`));
    return { all, streams };
  } finally {
    await store.close();
  }
}

test('v2 with a summary, or with a header field no reader knows, is read as v2 is; another version is refused', async () => {
  // docs/audit.md "Proofs without the whole log": the summary is an optional field of version 2, because the reader
  // (this one, and the release before's, whose segmentV2.ts is the same) refuses a version it does not know and
  // ignores a field it does not know, and the manifest's sha256 is of the block table alone.
  const tree = { first: 0, end: 1, roots: ['00'.repeat(32)], foreign: [] };
  const seg = await encodeSegment('store-1', rows, 4096, tree);
  assert.deepEqual((seg.header as { tree?: unknown }).tree, tree);
  const sub = join(dir, 'v2-summary');
  mkdirSync(sub);
  const path = await writeSegmentFile(sub, seg);
  const expect = { sha256: seg.header.sha256, count: rows.length };
  assert.deepEqual(readSegmentFile(path, seg.name, expect).rows, rows);
  const bytes = readFileSync(path);
  const nl = bytes.indexOf(10);
  const header = JSON.parse(bytes.subarray(0, nl).toString('utf8'));
  const rewrite = (h: unknown): void => writeFileSync(path, Buffer.concat([Buffer.from(JSON.stringify(h)), bytes.subarray(nl)]));
  rewrite({ ...header, later: { anything: [1, 2] } });
  assert.deepEqual(readSegmentFile(path, seg.name, expect).rows, rows);
  rewrite({ ...header, version: 3 });
  assert.throws(
    () => readSegmentFile(path, seg.name, expect),
    /changed: format converge-archive-segment v3, not converge-archive-segment v2/,
  );
});
