import type { ClientBase } from 'pg';
import type { SegmentBackfill } from '../archive/listedSegments.ts';
import type { ArchivedRow } from '../archive/segment.ts';
import { buildStreamFilter, filterBuckets, partMayHold } from '../archive/streamFilter.ts';

// The segments' stream filters on PostgreSQL, as SQLite keeps them (../sqlite/sqliteStreamFilter.ts,
// docs/operations.md "Retention and archive"): one row per segment and bucket, written in the
// move's own transaction, so a read of one stream asks for its bucket's rows and skips the segments
// that cannot hold it. The table is additive and made at every open, whatever the schema version
// (./schema.ts): the release before ignores it, and a segment it archived has no rows, so it is
// opened, until the next archive run of this release reads it and writes its filter.

export const streamFilterTableSql = (s: string): string => `
CREATE TABLE IF NOT EXISTS ${s}.archive_stream_filter (
  bucket smallint NOT NULL,
  file   text     NOT NULL,
  bits   bytea    NOT NULL,
  PRIMARY KEY (bucket, file)
)`;

/** The rows of `stream`'s bucket: `[file, bits]`, for `segmentsWithout`. */
export const streamFilterPartsSql = (s: string): string => `SELECT file, bits FROM ${s}.archive_stream_filter WHERE bucket = $1`;

/** The files among `parts` (streamFilterPartsSql's rows) whose filter rules `stream` out. */
export function segmentsWithout(parts: readonly unknown[][], stream: string): Set<string> {
  const without = new Set<string>();
  for (const [file, bits] of parts as [string, Buffer][]) if (!partMayHold(bits, stream)) without.add(file);
  return without;
}

/** Record a segment's filter; call inside the transaction that records the segment. */
export async function recordStreamFilter(client: ClientBase, s: string, file: string, rows: readonly ArchivedRow[]): Promise<void> {
  const parts = buildStreamFilter(rows.map((r) => r.stream));
  await client.query(
    `INSERT INTO ${s}.archive_stream_filter (bucket, file, bits) SELECT b, $1, bits FROM unnest($2::smallint[], $3::bytea[]) AS f(b, bits)
     ON CONFLICT (bucket, file) DO UPDATE SET bits = excluded.bits`,
    [file, Array.from({ length: filterBuckets }, (_, i) => i), parts],
  );
}

/**
 * The segments without a filter (archived by the release before): the next archive run reads each
 * whole, checked as the reader checks it, and writes its filter in one statement (backfillSegments).
 */
export async function streamFilterBackfill(client: ClientBase, s: string): Promise<SegmentBackfill> {
  const pending = await client.query<{ file: string }>(
    `SELECT file FROM ${s}.archive_segments WHERE file NOT IN (SELECT file FROM ${s}.archive_stream_filter WHERE bucket = 0)`,
  );
  return { pending: new Set(pending.rows.map((r) => r.file)), record: (file, rows) => recordStreamFilter(client, s, file, rows) };
}
