import type Database from 'better-sqlite3';
import type { ArchivedRow } from '../archive/segment.ts';
import { bucketOf, buildStreamFilter, partMayHold } from '../archive/streamFilter.ts';
import type { SegmentBackfill } from '../archive/listedSegments.ts';

// The segments' stream filters in the manifest (schema v8, docs/operations.md "Retention and
// archive"): `archive_stream_filter` holds each segment's filter (src/store/archive/streamFilter.ts)
// as one row per bucket, written in the move's own transaction. A read of one stream reads the rows
// of its bucket only. A segment archived before v8 has no rows, and is opened, until the next archive
// run (`store archive`, `serve --retain`) reads it and writes its filter.

/** Record a segment's filter; call inside the transaction that records the segment. */
export function prepareRecordStreamFilter(db: Database.Database): (file: string, rows: readonly ArchivedRow[]) => void {
  const insert = db.prepare('INSERT OR REPLACE INTO archive_stream_filter (bucket, file, bits) VALUES (?, ?, ?)');
  return (file, rows) => buildStreamFilter(rows.map((r) => r.stream)).forEach((part, bucket) => insert.run(bucket, file, part));
}

/** The manifest's segments whose filter says they do not hold `stream`. */
export function prepareStreamFilterQuery(conn: Database.Database): (stream: string) => Set<string> {
  const parts = conn.prepare('SELECT file, bits FROM archive_stream_filter WHERE bucket = ?').raw();
  return (stream) => {
    const without = new Set<string>();
    for (const [file, bits] of parts.all(bucketOf(stream)) as [string, Buffer][]) if (!partMayHold(bits, stream)) without.add(file);
    return without;
  };
}

/**
 * The segments archived before v8, with no filter: the next archive run reads each whole, checked
 * as the reader checks it, and writes its filter in a transaction of its own (backfillSegments).
 */
export function streamFilterBackfill(db: Database.Database): SegmentBackfill {
  const pending = db
    .prepare('SELECT file FROM archive_segments WHERE file NOT IN (SELECT file FROM archive_stream_filter WHERE bucket = 0)')
    .pluck()
    .all() as string[];
  const record = prepareRecordStreamFilter(db);
  return { pending: new Set(pending), record: (file, rows) => db.transaction(() => record(file, rows)).immediate() };
}
