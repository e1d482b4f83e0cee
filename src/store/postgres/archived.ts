import type { QueryConfig } from 'pg';
import type { ArchiveManifest } from '../port.ts';

// What the PostgreSQL store reads of its archive (schema v6, ./postgresArchive.ts moves it): the
// manifest, for the reads that merge segments in (../archive/withArchive.ts), and the archived
// sends, so findSend still tells a send moved out of `events` (a stale report) from a digest never
// sent to the node (unknown).

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
  `SELECT (SELECT value FROM ${s}.meta WHERE key = 'identity'), file, from_position, to_position, events, sha256, bytes, raw_bytes
     FROM (SELECT 1) one LEFT JOIN ${s}.archive_segments ON true ORDER BY from_position, file`;

/** The manifest from manifestSql's rows (one row with a null file when nothing is archived). */
export async function readPostgresManifest(
  run: (q: QueryConfig) => Promise<{ rows: unknown[][] }>,
  q: QueryConfig,
): Promise<ArchiveManifest> {
  const rows = (await run(q)).rows as [string | null, string | null, bigint, bigint, number, string, bigint, bigint][];
  return {
    store: rows[0]?.[0] ?? '',
    segments: rows
      .filter((r) => r[1] !== null)
      .map(([, file, from, to, events, sha256, bytes, raw]) => ({
        file: file!,
        from: BigInt(from),
        to: BigInt(to),
        events: Number(events),
        sha256,
        bytes: Number(bytes),
        rawBytes: Number(raw),
      })),
  };
}
