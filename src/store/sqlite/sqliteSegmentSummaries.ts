import type Database from 'better-sqlite3';
import type { RangeSummaryJson } from '../../core/audit/rangeSummary.ts';
import { summariesOfRows, summaryRow } from '../archive/storedSummaries.ts';
import type { StoredSummaryRow } from '../archive/storedSummaries.ts';
import { ensureTable, hasTable } from './sqliteTables.ts';

// The segments' summaries of their leaf ranges in the manifest (docs/audit.md "Proofs without the
// whole log", ../archive/storedSummaries.ts): one row a segment in `archive_segment_summaries`,
// written in the move's own transaction, so export reads every range's roots from one query. Made
// at open with no schema version, as `archive_segment_times` is: the release before never reads
// it and keeps opening the store, and a segment it archives has no row, so export reads that
// segment's header, as it did.

const summariesTable = `
CREATE TABLE IF NOT EXISTS archive_segment_summaries (
  file         TEXT    PRIMARY KEY,
  first_leaf   INTEGER NOT NULL,
  end_leaf     INTEGER NOT NULL,
  roots        BLOB    NOT NULL,
  foreign_rows TEXT    NOT NULL
) WITHOUT ROWID;
`;

/** Make the table if the file has none; writes nothing once it is there. */
export function ensureSegmentSummaries(db: Database.Database): void {
  ensureTable(db, 'archive_segment_summaries', summariesTable);
}

/** Record a segment's summary; call inside the transaction that records the segment (or alone, for a back-fill). */
export function prepareRecordSegmentSummary(db: Database.Database): (file: string, tree: RangeSummaryJson) => void {
  const insert = db.prepare(
    'INSERT OR REPLACE INTO archive_segment_summaries (file, first_leaf, end_leaf, roots, foreign_rows) VALUES (?, ?, ?, ?, ?)',
  );
  return (file, tree) => insert.run(...summaryRow(file, tree));
}

/** Every listed segment's stored summary, by file; a table the file does not have yet (a store never opened for writing) reads as none. */
export function prepareSegmentSummariesQuery(db: Database.Database): () => Map<string, RangeSummaryJson | string> {
  if (!hasTable(db, 'archive_segment_summaries')) return () => new Map();
  const all = db
    .prepare(
      'SELECT s.file, first_leaf, end_leaf, roots, foreign_rows FROM archive_segment_summaries s JOIN archive_segments a ON a.file = s.file',
    )
    .raw();
  return () => summariesOfRows(all.all() as StoredSummaryRow[]);
}

// The order the segments were archived in, which the back-fill places a segment by
// (../../core/audit/summaryBackfill.ts): a counter the move's transaction writes, in a table of its
// own made at open as the summaries' is, since the manifest's time is the clock's (a millisecond
// two segments can share, a clock stepped back) and the release before writes no counter.
const orderTable = `
CREATE TABLE IF NOT EXISTS archive_segment_order (
  file TEXT    PRIMARY KEY,
  seq  INTEGER NOT NULL UNIQUE
) WITHOUT ROWID;
`;

/** Make the table if the file has none; writes nothing once it is there. */
export function ensureSegmentOrder(db: Database.Database): void {
  ensureTable(db, 'archive_segment_order', orderTable);
}

/**
 * Place segment `file` after every other segment the manifest names; call inside the transaction
 * that records it, after its manifest row. Those with no place yet (archived before the counter, or
 * by the release before, all of them since the last segment placed) are placed first, by their time.
 */
export function prepareRecordSegmentOrder(db: Database.Database): (file: string) => void {
  const next = '(SELECT coalesce(max(seq), 0) FROM archive_segment_order)';
  const unplaced = db.prepare(
    `INSERT INTO archive_segment_order (file, seq) SELECT a.file, ${next} + row_number() OVER (ORDER BY a.archived_at, a.to_position, a.file) ` +
      'FROM archive_segments a WHERE a.file <> ? AND NOT EXISTS (SELECT 1 FROM archive_segment_order o WHERE o.file = a.file)',
  );
  const place = db.prepare(`INSERT INTO archive_segment_order (file, seq) VALUES (?, ${next} + 1)`);
  return (file) => {
    unplaced.run(file);
    place.run(file);
  };
}

/**
 * The listed segments' files in the order they were archived: by the move's counter, then those it
 * has not placed (archived since by the release before, or before the counter) by their time and last position.
 */
export function prepareSegmentOrderQuery(db: Database.Database): () => string[] {
  const all = hasTable(db, 'archive_segment_order')
    ? db.prepare(
        'SELECT a.file FROM archive_segments a LEFT JOIN archive_segment_order o ON o.file = a.file ' +
          'ORDER BY o.seq IS NULL, o.seq, a.archived_at, a.to_position, a.file',
      )
    : db.prepare('SELECT file FROM archive_segments ORDER BY archived_at, to_position, file');
  return () => all.pluck().all() as string[];
}

/** Keep summaries the back-fill made, one transaction for all; a segment that has one keeps it. */
export function prepareBackfillSummaries(db: Database.Database): (summaries: ReadonlyMap<string, RangeSummaryJson>) => void {
  const insert = db.prepare(
    'INSERT OR IGNORE INTO archive_segment_summaries (file, first_leaf, end_leaf, roots, foreign_rows) VALUES (?, ?, ?, ?, ?)',
  );
  return (summaries) => db.transaction(() => summaries.forEach((tree, file) => insert.run(...summaryRow(file, tree)))).immediate();
}
