import type Database from 'better-sqlite3';
import { ConvergeError } from '../../core/errors.ts';
import { listedSegmentRows } from '../archive/listedSegments.ts';
import type { ArchivedRow } from '../archive/segment.ts';
import type { ArchiveManifest, SendFound } from '../port.ts';
import { sendOf } from '../archive/archiveMove.ts';

// The archived sends (schema v7, docs/operations.md "Retention and archive"): one small row per
// DeclarationSent moved to the archive, written in the move's own transaction, so findSend still
// tells a send made long ago (a stale report) from a digest never sent to the node (unknown).
// Segments archived before v7 (`archive_segments.sends` NULL) are indexed by the next archive run,
// the first thing that knows the archive folder; until then findSend refuses to answer a miss.

/** Record `rows`' sends; call inside the transaction that records their segment. Returns how many. */
export function prepareRecordSends(db: Database.Database): (rows: readonly ArchivedRow[]) => number {
  const insert = db.prepare('INSERT OR REPLACE INTO archived_sends (stream, digest, position, serial, sent_at) VALUES (?, ?, ?, ?, ?)');
  return (rows) => {
    let n = 0;
    for (const r of rows) {
      const s = sendOf(r);
      if (s === null) continue;
      insert.run(...s);
      n++;
    }
    return n;
  };
}

/**
 * Index the sends of the manifest's segments that predate v7, one transaction per segment (a
 * crash leaves the rest for the next run). Reads each such segment whole, checked as the reader
 * checks it. Returns the segments indexed.
 */
export function indexArchivedSends(db: Database.Database, dir: string, manifest: ArchiveManifest): string[] {
  const pending = db.prepare('SELECT file FROM archive_segments WHERE sends IS NULL ORDER BY from_position').pluck().all() as string[];
  if (pending.length === 0) return [];
  const record = prepareRecordSends(db);
  const mark = db.prepare('UPDATE archive_segments SET sends = ? WHERE file = ?');
  const rowsOf = listedSegmentRows(dir, manifest);
  const done: string[] = [];
  for (const file of pending) {
    const rows = rowsOf(file);
    if (rows === null) continue;
    db.transaction(() => mark.run(record(rows), file)).immediate();
    done.push(file);
  }
  return done;
}

export type ArchivedSendQueries = Readonly<{ find: (stream: string, digest: string) => SendFound | null }>;

/** findSend's second look, on a miss in `events`. */
export function prepareArchivedSendQueries(conn: Database.Database): ArchivedSendQueries {
  const find = conn
    .prepare('SELECT serial, sent_at FROM archived_sends WHERE stream = ? AND digest = ? ORDER BY position DESC LIMIT 1')
    .raw();
  const unindexed = conn.prepare('SELECT file FROM archive_segments WHERE sends IS NULL LIMIT 1').pluck();
  return {
    find(stream, digest) {
      const row = find.get(stream, digest) as [number, string] | undefined;
      if (row !== undefined) return { serial: Number(row[0]), sentAt: row[1] };
      const file = unindexed.get() as string | undefined;
      // Not "never sent": a segment archived before v7 may hold the send. The caller (ingest)
      // stores the report without an answer rather than record a wrong one.
      if (file !== undefined)
        throw new ConvergeError(
          'CONVERGE_ERR_STORE_UNAVAILABLE',
          `the sends of archive segment ${file} are not indexed yet (archived before store schema v7); the next archive run (converge store archive, serve --retain) indexes them`,
          { details: { file } },
        );
      return null;
    },
  };
}
