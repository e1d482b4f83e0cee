import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import { rangeRoots } from '../../src/core/audit/rangeProofTree.ts';
import { makeAliveSeen, streamOf } from '../../src/core/events/index.ts';
import type { RangeSummaryJson } from '../../src/core/audit/rangeSummary.ts';
import type { ArchiveOptions, ArchiveSummary } from '../../src/store/archive/archiveMove.ts';
import { withArchive } from '../../src/store/archive/withArchive.ts';
import type { EventStore } from '../../src/store/port.ts';
import { createPostgresEventStore } from '../../src/store/postgres/index.ts';
import { archivePostgresStore } from '../../src/store/postgres/postgresArchive.ts';
import { archiveSqliteStore } from '../../src/store/sqlite/sqliteArchive.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { cliIn } from '../support/cliInProcess.ts';
import { unsignedBundle, withoutStoredSummaries, withoutSummaries } from '../support/evidence.ts';
import { describeOnPostgres, runSql, scratchSchema } from '../support/postgres.ts';
import type { ScratchSchema } from '../support/postgres.ts';
import { randomFleet } from '../support/randomArchiveFleet.ts';

// The segments' summaries of their leaf ranges (docs/audit.md "Proofs without the whole log") as
// each store's move writes them: serve --retain's batches of one segment, then a whole run that
// archives rows the first kept hot (so later segments hold rows inside earlier ranges). The ranges
// tile the archived tree from leaf 0, each range's roots and foreign rows are the whole log's,
// audit verify, which checks them, finds the store intact, and export reads only a node's segments.

type Target = Readonly<{
  open: () => EventStore;
  archive: (o: ArchiveOptions) => Promise<ArchiveSummary>;
  args: readonly string[];
  /** Drop the store's own copy of these segments' summaries, as for segments the release before archived. */
  forget: (files: readonly string[]) => Promise<void>;
}>;

async function summariesSuite(dir: string, target: () => Target): Promise<void> {
  const t = target();
  const archive = join(dir, 'archive');
  const { head, nodes } = await randomFleet(t.open(), 7);
  const cutoff = (days: number): string => new Date(Date.now() - days * 86_400_000).toISOString();
  // serve --retain (src/app/retention.ts): one segment a run, each from where the last one stopped.
  let cursor = 0n;
  let batches = 0;
  for (;;) {
    const r = await t.archive({ dir: archive, before: cutoff(60), belowPosition: head, segmentEvents: 37, maxSegments: 1, after: cursor });
    if (r.events === 0) break;
    cursor = r.scannedTo;
    batches++;
  }
  // Every node heard once more: the rows the batches kept hot as a stream's last are closed now, and the next run's
  // first segments hold only them, all below where the archived ranges end (empty ranges).
  const more = t.open();
  await more.append(
    nodes.map((node) => ({ stream: streamOf(node), expected: 'any' as const, events: [makeAliveSeen({ node }, Date.now() - 60_000)] })),
  );
  await more.close();
  const kept = await t.archive({ dir: archive, before: cutoff(0), belowPosition: head, segmentEvents: 2, maxSegments: 2 });
  const whole = await t.archive({ dir: archive, before: cutoff(0), belowPosition: head, segmentEvents: 53 });
  assert.ok(
    batches >= 3 && whole.segments.length >= 3,
    `${batches} batches, ${kept.segments.length}, then ${whole.segments.length} segments`,
  );

  const store = await withArchive(t.open(), archive);
  try {
    const rows = await store.readStored({ limit: 100_000 });
    const leafOf = new Map(rows.map((r, i) => [r.position, i]));
    const leaves = rows.map((r) => Buffer.from(r.leafHash!));
    const ranges = store.archive
      .summaries()
      .map((s) => ({ ...s, summary: s.summary as RangeSummaryJson }))
      .sort((a, b) => a.summary.first - b.summary.first);
    assert.equal(ranges.length, store.manifest.segments.length, 'every segment carries a summary');
    let end = 0;
    let foreign = 0;
    for (const s of ranges) {
      assert.equal(s.summary.first, end, `${s.name}: its range follows the one before it`);
      end = s.summary.end;
      assert.deepEqual(
        s.summary.roots,
        rangeRoots(s.summary.first, leaves.slice(s.summary.first, s.summary.end)).map((h) => h.toString('hex')),
      );
      const own = new Set(store.archive.positions(s.name));
      assert.deepEqual(
        s.summary.foreign,
        rows
          .slice(s.summary.first, s.summary.end)
          .flatMap((r) => (own.has(r.position) ? [] : [[r.position.toString(), Buffer.from(r.leafHash!).toString('hex')]])),
      );
      foreign += s.summary.foreign.length;
    }
    const last = store.manifest.segments.reduce((m, s) => (s.to > m ? s.to : m), 0n);
    assert.equal(end, leafOf.get(last)! + 1, 'the ranges reach the last archived row');
    assert.ok(foreign > 0, 'rows kept hot by the batches, archived by the whole run, are foreign in the earlier ranges');
  } finally {
    await store.close();
  }
  const verify = await cliIn(dir, ['audit', 'verify', ...t.args, '--archive-dir', archive]);
  assert.equal(verify.code, 0, verify.stdout + verify.stderr);
  assert.match(verify.stdout, /^intact: /);

  // Export from the summaries: the segments that hold the node read whole, the bundle the walk of every leaf gives.
  // The summaries come from the store: no header is opened but those of the segments read whole.
  const moment = new Date().toISOString();
  const ask = async (summaries: boolean | 'headers', node = 'solo2') => {
    const read = new Set<string>();
    const opened = new Set<string>();
    const s = await withArchive(t.open(), archive, { onRead: (file) => read.add(file), onOpen: (file) => opened.add(file) });
    try {
      const b = await unsignedBundle(
        summaries === true ? s : summaries === 'headers' ? withoutStoredSummaries(s) : withoutSummaries(s),
        node,
        moment,
      );
      const unread = [...opened].filter((f) => !read.has(f));
      return {
        bundle: JSON.stringify(b),
        read: read.size,
        readFiles: read,
        opened: opened.size,
        unread,
        segments: s.manifest.segments.length,
      };
    } finally {
      await s.close();
    }
  };
  // A node whose row kept hot by the batches was archived into a segment with an empty range: its rows lie in earlier ranges.
  const emptied = await withArchive(t.open(), archive);
  const empty = emptied.archive.summaries().find((x) => typeof x.summary !== 'string' && x.summary.first === x.summary.end);
  const quiet = empty === undefined ? undefined : emptied.archive.segmentRows(empty.name)[0]!.stream.slice('node-'.length);
  await emptied.close();
  assert.ok(quiet !== undefined, 'a segment with an empty range');
  assert.equal((await ask(true, quiet)).bundle, (await ask(false, quiet)).bundle, `${quiet}: the same bundle`);
  const [fromSummaries, fromHeaders, fromEvery] = [await ask(true), await ask('headers'), await ask(false)];
  assert.equal(fromSummaries.bundle, fromEvery.bundle);
  assert.equal(fromHeaders.bundle, fromEvery.bundle, "the headers' summaries give the same bundle");
  assert.ok(
    fromSummaries.read <= 4 && fromEvery.read === fromEvery.segments,
    `${fromSummaries.read} and ${fromEvery.read} of ${fromEvery.segments} read`,
  );
  assert.deepEqual(fromSummaries.unread, [], 'no header opened of a segment not read whole');
  assert.equal(fromHeaders.opened, fromHeaders.segments, 'without the stored summaries, every header is opened');

  // Segments whose summary the store does not keep (the release before archived them): their headers stand in.
  const listed = await withArchive(t.open(), archive);
  const older = listed.manifest.segments.filter((_, i) => i % 3 === 1).map((x) => x.file);
  await listed.close();
  await t.forget(older);
  const mixed = await ask(true);
  assert.equal(mixed.bundle, fromEvery.bundle, 'some summaries from the store, some from headers: the same bundle');
  assert.deepEqual(
    mixed.unread.sort(),
    older.filter((f) => !mixed.readFiles.has(f)).sort(),
    'besides the segments read whole, only the headers of those the store keeps no summary for are opened',
  );
}

// PostgreSQL's suite first: its probe connects while nothing else holds the event loop.
describeOnPostgres('archive summaries on a PostgreSQL store', () => {
  const dir = mkdtempSync(join(tmpdir(), 'converge-pg-archive-summaries-'));
  const scratches: ScratchSchema[] = [];
  after(async () => {
    for (const s of scratches) await s.drop();
    rmSync(dir, { recursive: true, force: true });
  });
  test("batches then a whole run: the ranges tile from leaf 0, hold the log's roots, verify, and export reads its node's segments", async () => {
    const scratch = scratchSchema('converge_pg_summaries');
    scratches.push(scratch);
    await summariesSuite(dir, () => ({
      open: () => createPostgresEventStore(scratch.url),
      archive: (o) => archivePostgresStore(scratch.url, o),
      args: ['--store', scratch.url],
      forget: (files) =>
        runSql(`DELETE FROM ${scratch.schema}.archive_segment_summaries WHERE file IN (${files.map((f) => `'${f}'`).join(', ')})`),
    }));
  });
});

describe('archive summaries on a SQLite store', () => {
  const dir = mkdtempSync(join(tmpdir(), 'converge-archive-summaries-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  test("batches then a whole run: the ranges tile from leaf 0, hold the log's roots, verify, and export reads its node's segments", async () => {
    const path = join(dir, 'fleet.db');
    await summariesSuite(dir, () => ({
      open: () => createSqliteEventStore(path),
      archive: (o) => archiveSqliteStore(path, o),
      args: ['--store', `sqlite:${path}`],
      forget: async (files) => {
        const db = new Database(path);
        try {
          const drop = db.prepare('DELETE FROM archive_segment_summaries WHERE file = ?');
          for (const f of files) drop.run(f);
        } finally {
          db.close();
        }
      },
    }));
  });
});
