import type { ClientBase } from 'pg';
import { ConvergeError } from '../../core/errors.ts';
import { archivedOf, moveClosedHistory, prepareArchiveDir, sendOf } from '../archive/archiveMove.ts';
import type { ArchiveOptions, ArchiveSource, ArchiveSummary } from '../archive/archiveMove.ts';
import { backfillSegments } from '../archive/listedSegments.ts';
import type { SegmentBackfill } from '../archive/listedSegments.ts';
import type { ArchivedRow } from '../archive/segment.ts';
import type { ArchiveManifest } from '../port.ts';
import { timeSql } from '../storeStats.ts';
import { manifestSql, readPostgresManifest, recordSegmentTimes } from './archived.ts';
import { pgError, postgresConnection } from './connection.ts';
import { clientFor } from './hosts.ts';
import { markArchived, migrate } from './schema.ts';
import { recordSegmentOrder, recordSegmentSummary } from './segmentSummaries.ts';
import { recordStreamFilter, streamFilterBackfill } from './streamFilter.ts';

// Retention on PostgreSQL (docs/operations.md "Retention and archive"): the move of
// ../archive/archiveMove.ts, its reads and its one transaction on a connection of its own.
// Several engines share the store, so one run at a time moves: a session advisory lock named
// after the schema, taken without waiting (a run that finds it taken is refused, and serve's
// periodic run tries again later) and released by the server when the run's session ends, a
// SIGKILLed run included. The move's transaction deletes rows no append touches (appends insert
// new positions and update only the `head` counter), so appends never wait on its locks; what
// they share is the server's disk, which the segment size bounds per transaction.

type Row = [bigint, string, string, bigint, string, string, string, string | null, string | null];

/** Move closed history from the PostgreSQL store at `url` to segments in `options.dir`. */
export async function archivePostgresStore(url: string, options: ArchiveOptions): Promise<ArchiveSummary> {
  const { schema, clientConfig } = postgresConnection(url, { applicationName: 'converge-archive' });
  const Client = clientFor(clientConfig);
  const client = new Client(clientConfig);
  // A connection that breaks fails its query, which reports it; this keeps the event from escaping.
  client.on('error', () => undefined);
  try {
    await client.connect();
    await migrate(client, schema);
    const lock = ['converge-archive:' + schema];
    const took = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS ok', lock);
    if (took.rows[0]?.ok !== true)
      throw new ConvergeError(
        'CONVERGE_ERR_STORE_IN_USE',
        `another archive run (another engine's serve --retain, or a store archive) holds postgres schema ${schema}'s archive lock; try again once it is done`,
      );
    try {
      const manifest = await readPostgresManifest((q) => client.query({ ...q, rowMode: 'array' }), { text: manifestSql(schema) });
      const removedLeftovers = prepareArchiveDir(options.dir, manifest);
      // Segments the release before archived (no stream filter, no time range): theirs, so reads
      // stop opening them; each read once.
      const fills = [await streamFilterBackfill(client, schema), await segmentTimesBackfill(client, schema, manifest)];
      await backfillSegments(options.dir, manifest, fills);
      const moved = await moveClosedHistory(postgresSource(client, schema, manifest), options);
      return { ...moved, removedLeftovers, indexedSends: [] };
    } finally {
      await client.query('SELECT pg_advisory_unlock(hashtextextended($1, 0))', lock).catch(() => undefined);
    }
  } catch (err) {
    throw pgError(err, `archive postgres schema ${schema}`);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** The move's reads and its transaction, on `client` (one query at a time). */
function postgresSource(client: ClientBase, s: string, manifest: ArchiveManifest): ArchiveSource {
  const rows = async (text: string, values: unknown[]): Promise<unknown[][]> =>
    (await client.query({ text, values, rowMode: 'array' })).rows;
  const pageSql =
    `SELECT position, id::text, stream, revision, type, data::text, metadata::text, encode(leaf, 'hex'), ` +
    `${timeSql((n) => `data->>'${n}'`)} FROM ${s}.events WHERE position > $1 AND position < $2 ORDER BY position LIMIT $3`;
  // The three rows each stream keeps hot, for every stream of a page in one round trip.
  const pinnedSql = `SELECT st,
      (SELECT position FROM ${s}.events WHERE stream = st ORDER BY revision DESC LIMIT 1),
      (SELECT max(position) FROM ${s}.events WHERE stream = st AND type = 'DeclarationSent'),
      (SELECT position FROM ${s}.events WHERE stream = st AND type = 'ReportReceived' ORDER BY revision DESC LIMIT 1)
    FROM unnest($1::text[]) AS st`;
  return {
    store: manifest.store,
    archived: archivedOf(manifest),
    countBelow: async (position) => Number((await rows(`SELECT count(*) FROM ${s}.events WHERE position < $1`, [String(position)]))[0]![0]),
    leaves: async (from, to) =>
      (
        (await rows(`SELECT position, encode(leaf, 'hex') FROM ${s}.events WHERE position >= $1 AND position <= $2 ORDER BY position`, [
          String(from),
          String(to),
        ])) as [string, string | null][]
      ).map(([p, leaf]) => [BigInt(p), leaf] as const),
    page: async (after, below, limit) =>
      ((await rows(pageSql, [String(after), String(below), limit])) as Row[]).map(
        ([position, id, stream, revision, type, data, metadata, leaf, time]): ArchivedRow => ({
          position: BigInt(position),
          id,
          stream,
          revision: BigInt(revision),
          type,
          data,
          metadata,
          time,
          leaf,
        }),
      ),
    pinned: async (streams) => {
      const out = new Map<string, ReadonlySet<bigint>>();
      for (const [st, ...kept] of (await rows(pinnedSql, [streams])) as [string, ...(bigint | null)[]][])
        out.set(st, new Set(kept.filter((p): p is bigint => p !== null).map(BigInt)));
      return out;
    },
    async commit(seg, pause) {
      const sends = seg.rows.map(sendOf).filter((x) => x !== null);
      await client.query('BEGIN');
      try {
        await client.query(
          `INSERT INTO ${s}.archive_segments (file, from_position, to_position, events, sha256, bytes, raw_bytes, sends) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
          [
            seg.file,
            String(seg.rows[0]!.position),
            String(seg.rows[seg.rows.length - 1]!.position),
            seg.rows.length,
            seg.sha256,
            seg.bytes,
            seg.rawBytes,
            sends.length,
          ],
        );
        await client.query(markArchived(s));
        await recordSegmentOrder(client, s, seg.file);
        await recordSegmentTimes(client, s, seg.file, seg.rows);
        // The segment's sends, in the transaction that moves them: findSend never misses one.
        if (sends.length > 0)
          await client.query(
            `INSERT INTO ${s}.archived_sends (stream, digest, position, serial, sent_at)
             SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::int[], $5::text[])`,
            [0, 1, 2, 3, 4].map((i) => sends.map((x) => (i === 2 ? String(x[i]) : x[i]))),
          );
        await recordStreamFilter(client, s, seg.file, seg.rows);
        if (seg.tree !== null) await recordSegmentSummary(client, s, seg.file, seg.tree);
        const gone = await client.query(`DELETE FROM ${s}.events WHERE position = ANY($1::bigint[])`, [
          seg.rows.map((r) => String(r.position)),
        ]);
        if (gone.rowCount !== seg.rows.length)
          throw new Error(`${seg.rows.length - (gone.rowCount ?? 0)} of the segment's positions left the store during the move`);
        pause('before-commit');
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      }
    },
  };
}

/** The segments with no time range (archived before it was kept, or by the release before). */
async function segmentTimesBackfill(client: ClientBase, s: string, manifest: ArchiveManifest): Promise<SegmentBackfill> {
  const known = await client.query<{ file: string }>(`SELECT file FROM ${s}.archive_segment_times`);
  const have = new Set(known.rows.map((r) => r.file));
  const pending = manifest.segments.filter((seg) => seg.minTime === undefined && !have.has(seg.file)).map((seg) => seg.file);
  return {
    pending: new Set(pending),
    record: (file, rows) => recordSegmentTimes(client, s, file, rows),
  };
}
