import Database from 'better-sqlite3';
import { ConvergeError } from '../../core/errors.ts';
import { archivedOf, makeArchiveDir, moveClosedHistory, prepareArchiveDir } from '../archive/archiveMove.ts';
import type { ArchiveOptions, ArchiveSource, ArchiveSummary, SegmentToRecord } from '../archive/archiveMove.ts';
import type { PauseAt } from '../archive/segment.ts';
import type { ArchiveManifest } from '../port.ts';
import { timeSql } from '../storeStats.ts';
import { indexArchivedSends, prepareRecordSends } from './sqliteArchivedSends.ts';
import { migrate } from './sqliteSchema.ts';
import { prepareRecordSegmentOrder, prepareRecordSegmentSummary } from './sqliteSegmentSummaries.ts';
import { prepareRecordSegmentTimes, segmentTimesBackfill } from './sqliteSegmentTimes.ts';
import { prepareRecordStreamFilter, streamFilterBackfill } from './sqliteStreamFilter.ts';
import { backfillSegments } from '../archive/listedSegments.ts';

// Retention on SQLite (docs/operations.md "Retention and archive"): the move of
// ../archive/archiveMove.ts, its reads and its one transaction on the store file, under a lock
// of its own so one run at a time moves. The manifest is `archive_segments` (schema v6), the
// archived sends `archived_sends` (v7, ./sqliteArchivedSends.ts).

export type { ArchiveOptions, ArchiveSummary } from '../archive/archiveMove.ts';

type Row = [bigint, string, string, bigint, string, string, string, Buffer | null, string | null];

/** Move closed history from the SQLite store at `path` to segments in `options.dir`. */
export async function archiveSqliteStore(path: string, options: ArchiveOptions): Promise<ArchiveSummary> {
  makeArchiveDir(options.dir);
  const lock = lockArchive(path);
  const db = new Database(path, { fileMustExist: true });
  try {
    db.pragma('busy_timeout = 5000');
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    migrate(db, path);
    const manifest = readManifest(db);
    const removedLeftovers = prepareArchiveDir(options.dir, manifest);
    // Segments archived before schema v7: their sends, for findSend, before anything moves.
    const indexedSends = indexArchivedSends(db, options.dir, manifest);
    // Segments archived before schema v8 (no stream filter) or with no time range (before it was
    // kept, or by the release before): theirs, so reads stop opening them; each read once.
    await backfillSegments(options.dir, manifest, [streamFilterBackfill(db), segmentTimesBackfill(db)]);
    const moved = await moveClosedHistory(sqliteSource(db, manifest), options);
    return { ...moved, removedLeftovers, indexedSends };
  } finally {
    db.close();
    lock.release();
  }
}

/** The move's reads and its transaction, on `db`. */
function sqliteSource(db: Database.Database, manifest: ArchiveManifest): ArchiveSource {
  const q = {
    countBelow: db.prepare('SELECT count(*) FROM events WHERE position < ?').pluck().safeIntegers(),
    leaves: db
      .prepare('SELECT position, CAST(leaf AS BLOB) FROM events WHERE position >= ? AND position <= ? ORDER BY position')
      .raw()
      .safeIntegers(),
    page: db
      .prepare(
        `SELECT position, id, stream, revision, type, data, metadata, CAST(leaf AS BLOB), ${timeSql((n) => `json_extract(data, '$.${n}')`)} ` +
          'FROM events WHERE position > ? AND position < ? ORDER BY position LIMIT ?',
      )
      .raw()
      .safeIntegers(),
    last: db.prepare('SELECT position FROM events WHERE stream = ? ORDER BY revision DESC LIMIT 1').pluck().safeIntegers(),
    lastSend: db
      .prepare("SELECT max(position) FROM events INDEXED BY events_sent_digest WHERE stream = ? AND type = 'DeclarationSent'")
      .pluck()
      .safeIntegers(),
    lastReport: db
      .prepare("SELECT position FROM events WHERE stream = ? AND type = 'ReportReceived' ORDER BY revision DESC LIMIT 1")
      .pluck()
      .safeIntegers(),
    record: db.prepare(
      'INSERT INTO archive_segments (file, from_position, to_position, events, sha256, bytes, raw_bytes, archived_at, sends) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
    ),
    recordSends: prepareRecordSends(db),
    recordFilter: prepareRecordStreamFilter(db),
    recordTimes: prepareRecordSegmentTimes(db),
    recordSummary: prepareRecordSegmentSummary(db),
    recordOrder: prepareRecordSegmentOrder(db),
    remove: db.prepare('DELETE FROM events WHERE position = ?').safeIntegers(),
  };
  const commit = db.transaction((seg: SegmentToRecord, pause: PauseAt) => {
    const { rows } = seg;
    // The segment's sends, in the transaction that moves them: findSend never misses one.
    const sends = q.recordSends(rows);
    q.record.run(
      seg.file,
      rows[0]!.position,
      rows[rows.length - 1]!.position,
      rows.length,
      seg.sha256,
      seg.bytes,
      seg.rawBytes,
      new Date().toISOString(),
      sends,
    );
    q.recordOrder(seg.file);
    q.recordFilter(seg.file, rows);
    q.recordTimes(seg.file, rows);
    if (seg.tree !== null) q.recordSummary(seg.file, seg.tree);
    for (const r of rows) {
      if (q.remove.run(r.position).changes !== 1) throw new Error(`position ${r.position} left the store during the move`);
    }
    pause('before-commit');
  });
  return {
    store: manifest.store,
    archived: archivedOf(manifest),
    countBelow: async (position) => Number(q.countBelow.get(position) as bigint),
    leaves: async (from, to) =>
      (q.leaves.all(from, to) as [bigint, Buffer | null][]).map(([p, leaf]) => [p, leaf === null ? null : leaf.toString('hex')] as const),
    page: async (after, below, limit) =>
      (q.page.all(after, below, limit) as Row[]).map(([position, id, stream, revision, type, data, metadata, leaf, time]) => ({
        position,
        id,
        stream,
        revision,
        type,
        data,
        metadata,
        time,
        leaf: leaf === null ? null : leaf.toString('hex'),
      })),
    pinned: async (streams) =>
      new Map(
        streams.map((stream) => [
          stream,
          new Set([q.last.get(stream), q.lastSend.get(stream), q.lastReport.get(stream)].filter((p): p is bigint => typeof p === 'bigint')),
        ]),
      ),
    commit: async (seg, pause) => commit.immediate(seg, pause),
  };
}

/** The manifest and the store's identity, read on `db`. */
export function readManifest(db: Database.Database): ArchiveManifest {
  const identity = db.prepare('SELECT identity FROM store_identity WHERE id = 1').pluck().get() as string | undefined;
  const rows = db
    .prepare(
      'SELECT s.file, from_position, to_position, events, sha256, bytes, raw_bytes, min_ms, max_ms ' +
        'FROM archive_segments s LEFT JOIN archive_segment_times t ON t.file = s.file ORDER BY from_position, s.file',
    )
    .raw()
    .safeIntegers()
    .all() as [string, bigint, bigint, bigint, string, bigint, bigint, bigint | null, bigint | null][];
  return {
    store: identity ?? '',
    segments: rows.map(([file, from, to, events, sha256, bytes, raw, min, max]) => ({
      file,
      from,
      to,
      events: Number(events),
      sha256,
      bytes: Number(bytes),
      rawBytes: Number(raw),
      ...(min === null || max === null ? {} : { minTime: Number(min), maxTime: Number(max) }),
    })),
  };
}

/**
 * One archive run per store at a time (serve's periodic one and a one-off `converge store archive`):
 * SQLite's own write lock on `<store>.archive-lock`, held while the run lasts and released by the
 * kernel if the process dies, so a crashed run never leaves it taken.
 */
function lockArchive(storePath: string): { release: () => void } {
  const path = `${storePath}.archive-lock`;
  const db = new Database(path, { timeout: 0 });
  try {
    db.pragma('journal_mode = WAL');
    db.exec('CREATE TABLE IF NOT EXISTS held (one INTEGER PRIMARY KEY)');
    db.exec('BEGIN IMMEDIATE');
  } catch (err) {
    db.close();
    const code = (err as { code?: unknown }).code;
    if (code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED')
      throw new ConvergeError('CONVERGE_ERR_STORE_IN_USE', `another archive run holds ${path}; try again once it is done`);
    throw err;
  }
  return {
    release: () => {
      db.exec('ROLLBACK');
      db.close();
    },
  };
}
