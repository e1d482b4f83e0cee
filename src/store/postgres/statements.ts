import type { QueryConfig } from 'pg';
import { auditHeadSql, readStoredSql } from './audit.ts';
import { findSendSql, manifestSql } from './archived.ts';
import { statementName } from './schema.ts';
import { segmentOrderSql, segmentSummariesSql } from './segmentSummaries.ts';
import { statsSql, storageSql } from './stats.ts';
import { streamFilterPartsSql } from './streamFilter.ts';

// The PostgreSQL adapter's named statements on schema `s` (postgresEventStore.ts). Each is prepared
// on a connection under a name that carries the schema (statementName), as the same text reads
// another schema's tables.

export type Statement = (...values: unknown[]) => QueryConfig;

/** An event row's columns, in the order the adapter decodes them. */
export const eventColumns = 'position, id, stream, revision, type, data, metadata';

/** A named statement on schema `s`. */
export const statementOn =
  (s: string) =>
  (name: string, text: string): Statement =>
  (...values) => ({ name: statementName(name, s), text, values });

export function postgresStatements(s: string) {
  const statement = statementOn(s);
  const cols = eventColumns;
  return {
    after: statement('after', `SELECT ${cols} FROM ${s}.events WHERE position > $1 ORDER BY position LIMIT $2`),
    afterPrefix: statement(
      'after_prefix',
      `SELECT ${cols} FROM ${s}.events WHERE position > $1 AND starts_with(stream, $2) ORDER BY position LIMIT $3`,
    ),
    forwards: statement('forwards', `SELECT ${cols} FROM ${s}.events WHERE stream = $1 AND revision >= $2 ORDER BY revision LIMIT $3`),
    backwards: statement(
      'backwards',
      `SELECT ${cols} FROM ${s}.events WHERE stream = $1 AND revision <= $2 ORDER BY revision DESC LIMIT $3`,
    ),
    head: statement('head', `SELECT position FROM ${s}.head`),
    // EventStore.findSend, hot or archived (./archived.ts).
    findSend: statement('find_send', findSendSql(s)),
    manifest: statement('archive_manifest', manifestSql(s)),
    filterParts: statement('archive_filter_parts', streamFilterPartsSql(s)),
    summaries: statement('archive_summaries', segmentSummariesSql(s)),
    segmentOrder: statement('archive_segment_order', segmentOrderSql(s)),
    auditHead: statement('audit_head', auditHeadSql(s)),
    readStored: statement('read_stored', readStoredSql(s)),
    // One statement per flush: the nodes as two arrays, each time only moving forward.
    saveLastSeen: statement(
      'save_last_seen',
      `WITH flushed AS (INSERT INTO ${s}.last_seen_flushes (engine, ms) VALUES ($1, $2) ON CONFLICT (engine) DO UPDATE SET ms = excluded.ms)
       INSERT INTO ${s}.last_seen (node, ms) SELECT * FROM unnest($3::text[], $4::bigint[])
       ON CONFLICT (node) DO UPDATE SET ms = greatest(${s}.last_seen.ms, excluded.ms)`,
    ),
    lastSeenNodes: statement('last_seen_nodes', `SELECT node, ms FROM ${s}.last_seen`),
    lastSeenFlushes: statement('last_seen_flushes', `SELECT engine, ms FROM ${s}.last_seen_flushes`),
    stats: statement('stats', statsSql(s)),
    storage: statement('storage', storageSql(s)),
    getCheckpoint: statement('get_checkpoint', `SELECT position FROM ${s}.checkpoints WHERE name = $1`),
    setCheckpoint: statement(
      'set_checkpoint',
      `INSERT INTO ${s}.checkpoints (name, position) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET position = excluded.position`,
    ),
  };
}
