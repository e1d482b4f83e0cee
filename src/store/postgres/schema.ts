import { createHash, randomUUID } from 'node:crypto';
import type { ClientBase } from 'pg';
import { ConvergeError } from '../../core/errors.ts';
import { segmentTimesSql } from './archived.ts';
import { auditSchemaV2 } from './audit.ts';
import { segmentOrderTableSql, segmentSummariesTableSql } from './segmentSummaries.ts';
import { streamFilterTableSql } from './streamFilter.ts';

// The tables behind the PostgreSQL adapter, all in one schema (default `converge`) so several
// stores can share a database and a test can drop its own. Bump `postgresSchemaVersion` with a
// step in `migrations` whenever they change; a newer schema is refused, as SQLite's is.

export const postgresSchemaVersion = 6;

/** A plain lower-case identifier: it is interpolated into DDL and into a NOTIFY channel (≤ 63 bytes). */
const schemaName = /^[a-z_][a-z0-9_]{0,49}$/;

export function checkSchemaName(schema: string): string {
  if (!schemaName.test(schema)) {
    throw new ConvergeError(
      'CONVERGE_ERR_CONFIG_INVALID',
      `postgres schema ${JSON.stringify(schema)} must be a lower-case identifier of at most 50 characters ([a-z_][a-z0-9_]*)`,
    );
  }
  return schema;
}

const maxIdentifier = 63;

/**
 * The name a prepared statement is prepared under on a connection: the schema is part of it, as
 * the same statement reads another schema's tables. PostgreSQL cuts names at 63 bytes (and `pg`
 * warns on stdout for each), so a name that would be longer ends in a digest of the schema.
 */
export function statementName(name: string, schema: string): string {
  const full = `converge_${name}_${schema}`;
  if (full.length <= maxIdentifier) return full;
  const digest = createHash('sha256').update(schema).digest('hex').slice(0, 12);
  return `${full.slice(0, maxIdentifier - digest.length - 1)}_${digest}`;
}

/** The channel appends NOTIFY on; subscriptions LISTEN to it (wake-ups, not data). */
export const channelOf = (schema: string): string => `converge_appended_${schema}`;

// Positions come from `head`, a one-row counter that every append updates in the same statement
// as its INSERT (./append.ts says why: it is what makes "after position P" never skip).
// `data` and `metadata` are `json`, not `jsonb`: stored as written (no re-encoding on either
// side), still queryable with ->>, and a \u0000 in a node's message does not fail the append.
const schemaV1 = (s: string): string => `
CREATE TABLE ${s}.events (
  position bigint PRIMARY KEY,
  id       uuid   NOT NULL UNIQUE,
  stream   text   NOT NULL,
  revision bigint NOT NULL,
  type     text   NOT NULL,
  data     json   NOT NULL,
  metadata json   NOT NULL,
  UNIQUE (stream, revision)
);
-- The relay's subscription reads only DeclarationSent, rare among reports and alives: a partial
-- index serves it without reading the rest of the log, and ingest's rows add nothing to it.
CREATE INDEX events_declarations ON ${s}.events (position) WHERE type = 'DeclarationSent';
CREATE TABLE ${s}.head (
  only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
  position bigint  NOT NULL
);
INSERT INTO ${s}.head (position) VALUES (0);
CREATE TABLE ${s}.checkpoints (
  name     text   PRIMARY KEY,
  position bigint NOT NULL
);
CREATE FUNCTION ${s}.notify_appended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify(TG_ARGV[0], '');
  RETURN NULL;
END $$;
CREATE TRIGGER notify_appended AFTER INSERT ON ${s}.events
  FOR EACH STATEMENT EXECUTE FUNCTION ${s}.notify_appended('${channelOf(s)}');
CREATE TABLE ${s}.meta (
  key   text PRIMARY KEY,
  value text NOT NULL
);
INSERT INTO ${s}.meta (key, value) VALUES ('store', 'converge'), ('schema_version', '1');
`;

/** migrations[v] turns a version-v schema into version v+1, inside the migration transaction. */
const migrations: Readonly<Record<number, (s: string) => string>> = {
  // v2: the sends of a stream by digest, for EventStore.findSend (ingest's rare lookup of a
  // digest older than the fold keeps); partial, so reports and alives add nothing to it.
  1: (s) => `CREATE INDEX events_sent_digest ON ${s}.events (stream, (data->>'digest')) WHERE type = 'DeclarationSent'`,
  // v3: leases with a liveness bound of their own (./lease.ts), in place of session advisory locks.
  2: (s) => `
CREATE TABLE ${s}.leases (
  name         text        PRIMARY KEY,
  generation   bigint      NOT NULL,
  beat         bigint      NOT NULL,
  holder_pid   int,
  holder_start timestamptz
);`,
  // v4: the audit tree (audit.ts), computed over the events already stored in one statement.
  3: auditSchemaV2,
  // v5: the last-seen lease (docs/design.md §3 "Liveness as recorded"), overwritten in place.
  4: (s) => `
CREATE TABLE ${s}.last_seen (
  node text   PRIMARY KEY,
  ms   bigint NOT NULL
);
CREATE TABLE ${s}.last_seen_flushes (
  engine text   PRIMARY KEY,
  ms     bigint NOT NULL
);`,
  // v6: retention (./postgresArchive.ts, docs/operations.md "Retention and archive"), as SQLite's
  // v6 and v7 in one step: the manifest of archive segments, the archived sends findSend asks on
  // a miss in `events`, and the store's identity that each segment names. No row is touched, and
  // the step is deferred (see `deferredStep`): the tables are made at open, the version is written
  // by the first archive move.
  5: (s) => `
CREATE TABLE IF NOT EXISTS ${s}.archive_segments (
  file          text        PRIMARY KEY,
  from_position bigint      NOT NULL,
  to_position   bigint      NOT NULL,
  events        integer     NOT NULL,
  sha256        text        NOT NULL,
  bytes         bigint      NOT NULL,
  raw_bytes     bigint      NOT NULL,
  archived_at   timestamptz NOT NULL DEFAULT now(),
  sends         integer     NOT NULL
);
CREATE TABLE IF NOT EXISTS ${s}.archived_sends (
  stream   text    NOT NULL,
  digest   text    NOT NULL,
  position bigint  NOT NULL,
  serial   integer NOT NULL,
  sent_at  text    NOT NULL,
  PRIMARY KEY (stream, digest, position)
);
INSERT INTO ${s}.meta (key, value) VALUES ('identity', '${randomUUID()}') ON CONFLICT (key) DO NOTHING;`,
};

/**
 * The step whose tables a v5 store gets at open while its version stays 5, until the first
 * archive move writes 6 in its own transaction (`markArchived`). Its tables are new and only this
 * release reads them, so the previous release keeps running side by side on the store until it
 * holds archived history, which that release could not read (docs/operations.md "Upgrades").
 */
const deferredStep = 5;

/** In the archive move's transaction: the store now holds archived history (schema v6). */
export const markArchived = (schema: string): string =>
  `UPDATE ${schema}.meta SET value = '${deferredStep + 1}' WHERE key = 'schema_version' AND value = '${deferredStep}'`;

/**
 * Create the schema on first use, or check and upgrade it. Engines starting together take turns
 * on a transaction-scoped advisory lock named after the schema.
 */
export async function migrate(client: ClientBase, schema: string): Promise<void> {
  const where = `postgres schema ${schema}`;
  await client.query('BEGIN');
  try {
    await client.query("SELECT pg_advisory_xact_lock(hashtextextended('converge-migrate:' || $1, 0))", [schema]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    const meta = await client.query<{ found: string | null }>('SELECT to_regclass($1) AS found', [`${schema}.meta`]);
    if (meta.rows[0]?.found === null) {
      const tables = await client.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = $1 AND table_type = 'BASE TABLE'",
        [schema],
      );
      if ((tables.rows[0]?.n ?? 0) > 0) {
        throw new ConvergeError(
          'CONVERGE_ERR_STORE_SCHEMA',
          `${where} holds tables but is not a Converge event store; refusing to touch it`,
        );
      }
      // A new schema is made as v1 and then migrated: one path to every version, as SQLite's.
      await client.query(schemaV1(schema));
    }
    const rows = await client.query<{ key: string; value: string }>(`SELECT key, value FROM ${schema}.meta`);
    const get = (k: string): string | undefined => rows.rows.find((r) => r.key === k)?.value;
    if (get('store') !== 'converge') {
      throw new ConvergeError('CONVERGE_ERR_STORE_SCHEMA', `${where} has a meta table but is not a Converge event store`);
    }
    const version = Number(get('schema_version'));
    if (!(version <= postgresSchemaVersion)) {
      throw new ConvergeError(
        'CONVERGE_ERR_STORE_SCHEMA',
        `${where} has store schema v${get('schema_version')}, written by a newer Converge; this one reads up to v${postgresSchemaVersion}. Upgrade Converge`,
        { details: { found: get('schema_version') ?? null, supported: postgresSchemaVersion } },
      );
    }
    for (let v = version; v < postgresSchemaVersion; v++) {
      const step = migrations[v];
      if (step === undefined) {
        throw new ConvergeError(
          'CONVERGE_ERR_STORE_SCHEMA',
          `${where} has store schema v${v} and there is no migration from it to v${v + 1}`,
        );
      }
      await client.query(step(schema));
      if (v === deferredStep) break;
      await client.query(`UPDATE ${schema}.meta SET value = $1 WHERE key = 'schema_version'`, [String(v + 1)]);
    }
    // Added at open with no version of their own, whatever the version: a store archived by the
    // release before (v6) gets them too, and that release, which never reads them, keeps opening the
    // store (docs/store.md). Made only when missing, so an open that finds them writes nothing.
    for (const [table, sql] of [
      ['archive_stream_filter', streamFilterTableSql],
      ['archive_segment_times', segmentTimesSql],
      ['archive_segment_summaries', segmentSummariesTableSql],
      ['archive_segment_order', segmentOrderTableSql],
    ] as const) {
      const found = await client.query<{ found: string | null }>('SELECT to_regclass($1) AS found', [`${schema}.${table}`]);
      if (found.rows[0]?.found === null) await client.query(sql(schema));
    }
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}
