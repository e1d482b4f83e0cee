import type { ClientBase, QueryConfig } from 'pg';
import type { RangeSummaryJson } from '../../core/audit/rangeSummary.ts';
import { summaryRow } from '../archive/storedSummaries.ts';

// The segments' summaries of their leaf ranges on PostgreSQL, as SQLite keeps them
// (../sqlite/sqliteSegmentSummaries.ts, docs/audit.md "Proofs without the whole log"): one row a
// segment, written in the move's own transaction, read by export in one query. Made at every open
// with no schema version (./schema.ts), as the stream filters are: the release before, which may
// run beside this one on the same schema, never reads it, and the segments it archives have no
// row, so export reads their headers.

export const segmentSummariesTableSql = (s: string): string => `
CREATE TABLE IF NOT EXISTS ${s}.archive_segment_summaries (
  file         text    PRIMARY KEY,
  first_leaf   bigint  NOT NULL,
  end_leaf     bigint  NOT NULL,
  roots        bytea   NOT NULL,
  foreign_rows text    NOT NULL
)`;

/** Every listed segment's stored summary, as StoredSummaryRow. */
export const segmentSummariesSql = (s: string): string =>
  `SELECT x.file, x.first_leaf, x.end_leaf, x.roots, x.foreign_rows
     FROM ${s}.archive_segment_summaries x JOIN ${s}.archive_segments a ON a.file = x.file`;

/** Record a segment's summary; in the move's transaction, or alone for a back-fill. */
export async function recordSegmentSummary(client: ClientBase, s: string, file: string, tree: RangeSummaryJson): Promise<void> {
  const [, first, end, roots, foreign] = summaryRow(file, tree);
  await client.query(
    `INSERT INTO ${s}.archive_segment_summaries (file, first_leaf, end_leaf, roots, foreign_rows) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (file) DO UPDATE SET first_leaf = excluded.first_leaf, end_leaf = excluded.end_leaf, roots = excluded.roots,
       foreign_rows = excluded.foreign_rows`,
    [file, first, end, roots, foreign],
  );
}

// The order the segments were archived in, as SQLite keeps it (../sqlite/sqliteSegmentSummaries.ts):
// a counter the move's transaction writes, since `archived_at` is the server's clock at the
// transaction's start, which a clock stepped back (or a failover to a server whose clock is behind)
// puts out of order; made at every open, and the release before writes none.
export const segmentOrderTableSql = (s: string): string => `
CREATE TABLE IF NOT EXISTS ${s}.archive_segment_order (
  file text   PRIMARY KEY,
  seq  bigint NOT NULL UNIQUE
)`;

/**
 * Place segment `file` after every other segment the manifest names, in the move's transaction
 * after its manifest row (the move holds the archive lock, so no other run counts beside it). Those
 * with no place yet (archived before the counter, or by the release before) are placed first, by their time.
 */
export async function recordSegmentOrder(client: ClientBase, s: string, file: string): Promise<void> {
  const next = `(SELECT coalesce(max(seq), 0) FROM ${s}.archive_segment_order)`;
  await client.query(
    `INSERT INTO ${s}.archive_segment_order (file, seq)
     SELECT a.file, ${next} + row_number() OVER (ORDER BY a.archived_at, a.to_position, a.file)
       FROM ${s}.archive_segments a
      WHERE a.file <> $1 AND NOT EXISTS (SELECT 1 FROM ${s}.archive_segment_order o WHERE o.file = a.file)`,
    [file],
  );
  await client.query(`INSERT INTO ${s}.archive_segment_order (file, seq) VALUES ($1, ${next} + 1)`, [file]);
}

/**
 * The listed segments' files in the order they were archived: by the move's counter, then those it
 * has not placed (archived since by the release before, or before the counter) by their time and last position.
 */
export const segmentOrderSql = (s: string): string =>
  `SELECT a.file FROM ${s}.archive_segments a LEFT JOIN ${s}.archive_segment_order o ON o.file = a.file
    ORDER BY o.seq IS NULL, o.seq, a.archived_at, a.to_position, a.file`;

/** Keep summaries the back-fill made, in one statement; a segment that has one keeps it. */
export function backfillSummariesQuery(s: string, summaries: ReadonlyMap<string, RangeSummaryJson>): QueryConfig {
  const rows = [...summaries].map(([file, tree]) => summaryRow(file, tree));
  return {
    text: `INSERT INTO ${s}.archive_segment_summaries (file, first_leaf, end_leaf, roots, foreign_rows)
           SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bytea[], $5::text[]) ON CONFLICT (file) DO NOTHING`,
    values: [0, 1, 2, 3, 4].map((i) => rows.map((r) => r[i])),
  };
}
