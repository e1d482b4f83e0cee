import { mkdirSync, readdirSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { ConvergeError } from '../../core/errors.ts';
import { encodeSegment, segmentFilePattern, syncDir, writeSegmentFile } from '../archive/segment.ts';
import type { ArchivedRow, PauseAt } from '../archive/segment.ts';
import type { ArchiveManifest } from '../port.ts';
import { timeSql } from '../storeStats.ts';
import { indexArchivedSends, prepareRecordSends } from './sqliteArchivedSends.ts';
import { migrate } from './sqliteSchema.ts';
import { fillStreamFilters, prepareRecordStreamFilter } from './sqliteStreamFilter.ts';

// Retention that archives, never deletes (docs/operations.md "Retention and archive"): closed
// history moves from the hot `events` table to compressed segments in an archive folder. Each
// segment is written whole (temp file, fsync, rename, fsync of the folder) before ONE transaction
// records it in `archive_segments` and deletes its rows; a crash between the two leaves the rows
// in the store and a segment the manifest does not name, which the next run removes.
//
// Closed: a node stream's event recorded before the cutoff, at a position below the latest
// snapshot's (start-up never needs it), and not one the engine reads from the hot store alone:
// each node stream keeps its last event (its revision), its last DeclarationSent (the serial and
// digest a send and findSend go on from) and its last ReportReceived (what it carries).

export type ArchiveOptions = Readonly<{
  dir: string;
  /** Events whose recorded time is before this ISO time are old enough. */
  before: string;
  /** Only positions below this one: the latest snapshot's. */
  belowPosition: bigint;
  /** Events per segment at most (default 100,000). */
  segmentEvents?: number;
  /** Stop after this many segments (serve's bounded batches); default no bound. */
  maxSegments?: number;
  /** Look only past this position (where the run before stopped, in serve's batches); default the start. */
  after?: bigint;
  onProgress?: (p: Readonly<{ position: bigint; upTo: bigint; segments: number; events: number }>) => void;
  /** Test hook; default: CONVERGE_TEST_ARCHIVE_PAUSE (the archive crash test). */
  pause?: PauseAt;
}>;

export type ArchiveSummary = Readonly<{
  segments: readonly string[];
  events: number;
  /** Stored data and metadata of the events moved (as `store stats` counts bytes). */
  storedBytes: number;
  /** The segments: uncompressed, and on disk. */
  rawBytes: number;
  bytes: number;
  /** Files of an interrupted run the manifest did not name, removed (their rows were still in the store). */
  removedLeftovers: readonly string[];
  /** How far this run looked: the next batch may start after it. */
  scannedTo: bigint;
  /** Segments archived before store schema v7 whose sends this run indexed (sqliteArchivedSends.ts). */
  indexedSends: readonly string[];
}>;

/** Rows read per query while looking for closed events. */
const scanPage = 5_000;

/**
 * CONVERGE_TEST_ARCHIVE_PAUSE=<phase>[:<k>]: at the k-th time (default the first) the move reaches
 * `phase`, print `paused <phase>` and block, so the archive crash test SIGKILLs it exactly there.
 * Phases: temp-written, renamed, before-commit (inside the transaction), committed.
 */
function pauseFromEnv(): PauseAt {
  const spec = process.env['CONVERGE_TEST_ARCHIVE_PAUSE'];
  if (spec === undefined || spec === '') return () => {};
  const [want, nth] = spec.split(':');
  let seen = 0;
  return (phase) => {
    if (phase !== want || ++seen < Number(nth ?? 1)) return;
    writeSync(1, `paused ${phase}\n`);
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
  };
}

type Row = [bigint, string, string, bigint, string, string, string, Buffer | null, string | null];

/** Move closed history from the SQLite store at `path` to segments in `options.dir`. */
export async function archiveSqliteStore(path: string, options: ArchiveOptions): Promise<ArchiveSummary> {
  const pause = options.pause ?? pauseFromEnv();
  const segmentEvents = options.segmentEvents ?? 100_000;
  const maxSegments = options.maxSegments ?? Infinity;
  mkdirSync(options.dir, { recursive: true });
  const lock = lockArchive(path);
  const db = new Database(path, { fileMustExist: true });
  try {
    db.pragma('busy_timeout = 5000');
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    migrate(db, path);
    const manifest = readManifest(db);
    const removedLeftovers = removeLeftovers(options.dir, new Set(manifest.segments.map((s) => s.file)));
    // Segments archived before schema v7: their sends, for findSend, before anything moves.
    const indexedSends = indexArchivedSends(db, options.dir, manifest);
    // Segments archived before schema v8: their stream filters, so reads stop opening them.
    await fillStreamFilters(db, options.dir, manifest);
    const q = {
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
      remove: db.prepare('DELETE FROM events WHERE position = ?').safeIntegers(),
    };
    const pinnedOf = new Map<string, ReadonlySet<bigint>>();
    const pinned = (stream: string): ReadonlySet<bigint> => {
      let set = pinnedOf.get(stream);
      if (set === undefined) {
        set = new Set(
          [q.last.get(stream), q.lastSend.get(stream), q.lastReport.get(stream)].filter((p): p is bigint => typeof p === 'bigint'),
        );
        pinnedOf.set(stream, set);
      }
      return set;
    };

    const commit = db.transaction((file: string, rows: readonly ArchivedRow[], sha: string, bytes: number, rawBytes: number) => {
      // The segment's sends, in the transaction that moves them: findSend never misses one.
      const sends = q.recordSends(rows);
      q.record.run(
        file,
        rows[0]!.position,
        rows[rows.length - 1]!.position,
        rows.length,
        sha,
        bytes,
        rawBytes,
        new Date().toISOString(),
        sends,
      );
      q.recordFilter(file, rows);
      for (const r of rows) {
        if (q.remove.run(r.position).changes !== 1) throw new Error(`position ${r.position} left the store during the move`);
      }
      pause('before-commit');
    });

    const segments: string[] = [];
    let events = 0;
    let storedBytes = 0;
    let rawBytes = 0;
    let bytes = 0;
    let pending: ArchivedRow[] = [];

    const flush = async (): Promise<void> => {
      if (pending.length === 0) return;
      const rows = pending;
      pending = [];
      const seg = await encodeSegment(manifest.store, rows);
      const file = writeSegmentFile(options.dir, seg, pause);
      try {
        commit.immediate(seg.name, rows, seg.header.sha256, seg.bytes.length, seg.rawBytes);
      } catch (err) {
        rmSync(file, { force: true });
        throw err;
      }
      pause('committed');
      segments.push(seg.name);
      events += rows.length;
      rawBytes += seg.rawBytes;
      bytes += seg.bytes.length;
      for (const r of rows) storedBytes += Buffer.byteLength(r.data, 'utf8') + Buffer.byteLength(r.metadata, 'utf8');
      // Streams whose pinned rows a later page names are looked up afresh: the store moved on.
      pinnedOf.clear();
    };

    let after = options.after ?? 0n;
    for (;;) {
      if (segments.length >= maxSegments) break;
      const page = q.page.all(after, options.belowPosition, scanPage) as Row[];
      if (page.length === 0) break;
      for (const [position, id, stream, revision, type, data, metadata, leaf, time] of page) {
        after = position;
        if (!stream.startsWith('node-') || time === null || !(time < options.before)) continue;
        if (pinned(stream).has(position)) continue;
        pending.push({ position, id, stream, revision, type, data, metadata, time, leaf: leaf === null ? null : leaf.toString('hex') });
        if (pending.length >= segmentEvents) {
          await flush();
          if (segments.length >= maxSegments) break;
        }
      }
      options.onProgress?.({ position: after, upTo: options.belowPosition, segments: segments.length, events: events + pending.length });
      // Let the event loop run between pages (serve's requests, a progress line).
      await new Promise((r) => setImmediate(r));
    }
    if (segments.length < maxSegments) await flush();
    return { segments, events, storedBytes, rawBytes, bytes, removedLeftovers, scannedTo: after, indexedSends };
  } finally {
    db.close();
    lock.release();
  }
}

/** The manifest and the store's identity, read on `db`. */
export function readManifest(db: Database.Database): ArchiveManifest {
  const identity = db.prepare('SELECT identity FROM store_identity WHERE id = 1').pluck().get() as string | undefined;
  const rows = db
    .prepare('SELECT file, from_position, to_position, events, sha256, bytes, raw_bytes FROM archive_segments ORDER BY from_position, file')
    .raw()
    .safeIntegers()
    .all() as [string, bigint, bigint, bigint, string, bigint, bigint][];
  return {
    store: identity ?? '',
    segments: rows.map(([file, from, to, events, sha256, bytes, raw]) => ({
      file,
      from,
      to,
      events: Number(events),
      sha256,
      bytes: Number(bytes),
      rawBytes: Number(raw),
    })),
  };
}

/** Temp files, and segments the manifest does not name: a run that died before its commit. Their rows are still in the store. */
function removeLeftovers(dir: string, named: ReadonlySet<string>): string[] {
  const removed: string[] = [];
  for (const name of readdirSync(dir)) {
    const temp = name.endsWith('.ndjson.br.tmp');
    if (!temp && !(segmentFilePattern.test(name) && !named.has(name))) continue;
    rmSync(join(dir, name), { force: true });
    removed.push(name);
  }
  if (removed.length > 0) syncDir(dir);
  return removed;
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
