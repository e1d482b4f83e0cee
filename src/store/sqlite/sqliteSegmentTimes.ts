import type Database from 'better-sqlite3';
import { ensureTable } from './sqliteTables.ts';
import type { ArchivedRow } from '../archive/segment.ts';
import { timeRangeOf } from '../archive/segmentTimes.ts';
import type { SegmentBackfill } from '../archive/listedSegments.ts';

// The segments' time ranges in the manifest (docs/store.md "Segment time ranges"): one row a
// segment in `archive_segment_times`, written in the move's own transaction, NULLs when a row has
// no readable time. The table is made at open and the schema version stays: a release that does
// not know it keeps reading and archiving the store, and its segments, with no row, are opened by
// every read until the next archive run of this one reads them and writes their rows.

const segmentTimesTable = `
CREATE TABLE IF NOT EXISTS archive_segment_times (
  file   TEXT    PRIMARY KEY,
  min_ms INTEGER,
  max_ms INTEGER
) WITHOUT ROWID;
`;

/** Make the table if the file has none; a no-op write-free statement once it is there. */
export function ensureSegmentTimes(db: Database.Database): void {
  ensureTable(db, 'archive_segment_times', segmentTimesTable);
}

/** Record a segment's time range; call inside the transaction that records the segment. */
export function prepareRecordSegmentTimes(db: Database.Database): (file: string, rows: readonly ArchivedRow[]) => void {
  const insert = db.prepare('INSERT OR REPLACE INTO archive_segment_times (file, min_ms, max_ms) VALUES (?, ?, ?)');
  return (file, rows) => {
    const range = timeRangeOf(rows);
    insert.run(file, range?.min ?? null, range?.max ?? null);
  };
}

/**
 * The segments with no row (archived before this table, or by an older release): the next archive
 * run reads each whole and writes its row in a transaction of its own (backfillSegments).
 */
export function segmentTimesBackfill(db: Database.Database): SegmentBackfill {
  const pending = db
    .prepare('SELECT file FROM archive_segments WHERE file NOT IN (SELECT file FROM archive_segment_times)')
    .pluck()
    .all() as string[];
  const record = prepareRecordSegmentTimes(db);
  return { pending: new Set(pending), record: (file, rows) => db.transaction(() => record(file, rows)).immediate() };
}
