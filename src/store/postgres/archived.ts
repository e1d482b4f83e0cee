import type { ClientBase, QueryConfig } from 'pg';
import type { ArchivedRow } from '../archive/segment.ts';
import { timeRangeOf } from '../archive/segmentTimes.ts';
import type { ArchiveManifest } from '../port.ts';

// What the PostgreSQL store reads of its archive (schema v6, ./postgresArchive.ts moves it): the
// manifest, for the reads that merge segments in (../archive/withArchive.ts), and the archived
// sends, so findSend still tells a send moved out of `events` (a stale report) from a digest never
// sent to the node (unknown). Each segment's time range (`archive_segment_times`, made at open with
// no version of its own, docs/store.md "Segment time ranges") comes with the manifest.

/**
 * findSend: the newest send of the digest, hot or archived, in one statement (one snapshot: a
 * move committing meanwhile cannot hide it from both). The hot half names the type so the
 * partial index events_sent_digest (schema.ts, v2) serves it.
 */
export const findSendSql = (s: string): string =>
  `(SELECT (data->>'serial')::int, data->>'sentAt', position FROM ${s}.events
     WHERE type = 'DeclarationSent' AND stream = $1 AND data->>'digest' = $2 ORDER BY position DESC LIMIT 1)
   UNION ALL
   (SELECT serial, sent_at, position FROM ${s}.archived_sends WHERE stream = $1 AND digest = $2 ORDER BY position DESC LIMIT 1)
   ORDER BY 3 DESC LIMIT 1`;

export const manifestSql = (s: string): string =>
  `SELECT (SELECT value FROM ${s}.meta WHERE key = 'identity'), a.file, from_position, to_position, events, sha256, bytes, raw_bytes,
          min_ms, max_ms
     FROM (SELECT 1) one LEFT JOIN ${s}.archive_segments a ON true LEFT JOIN ${s}.archive_segment_times t ON t.file = a.file
     ORDER BY from_position, a.file`;

/** The manifest from manifestSql's rows (one row with a null file when nothing is archived). */
export async function readPostgresManifest(
  run: (q: QueryConfig) => Promise<{ rows: unknown[][] }>,
  q: QueryConfig,
): Promise<ArchiveManifest> {
  const rows = (await run(q)).rows as [
    string | null,
    string | null,
    bigint,
    bigint,
    number,
    string,
    bigint,
    bigint,
    string | null,
    string | null,
  ][];
  return {
    store: rows[0]?.[0] ?? '',
    segments: rows
      .filter((r) => r[1] !== null)
      .map(([, file, from, to, events, sha256, bytes, raw, min, max]) => ({
        file: file!,
        from: BigInt(from),
        to: BigInt(to),
        events: Number(events),
        sha256,
        bytes: Number(bytes),
        rawBytes: Number(raw),
        ...(min === null || max === null ? {} : { minTime: Number(min), maxTime: Number(max) }),
      })),
  };
}

/** The segments' time ranges: made at open, every version, so the release before (which does not know it) still opens the store. */
export const segmentTimesSql = (s: string): string => `
CREATE TABLE IF NOT EXISTS ${s}.archive_segment_times (
  file   text   PRIMARY KEY,
  min_ms bigint,
  max_ms bigint
)`;

/** Record a segment's time range (NULLs when a row has no readable time); in the move's transaction, or alone for a back-fill. */
export async function recordSegmentTimes(client: ClientBase, s: string, file: string, rows: readonly ArchivedRow[]): Promise<void> {
  const range = timeRangeOf(rows);
  await client.query(`INSERT INTO ${s}.archive_segment_times (file, min_ms, max_ms) VALUES ($1, $2, $3) ON CONFLICT (file) DO NOTHING`, [
    file,
    range === null ? null : String(range.min),
    range === null ? null : String(range.max),
  ]);
}
