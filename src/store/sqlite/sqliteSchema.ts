import { randomUUID } from 'node:crypto';
import type Database from 'better-sqlite3';
import { ConvergeError } from '../../core/errors.ts';
import { migrateAuditTree } from './sqliteAudit.ts';
import { ensureSegmentOrder, ensureSegmentSummaries } from './sqliteSegmentSummaries.ts';
import { ensureSegmentTimes } from './sqliteSegmentTimes.ts';
import type { AuditMigrationProgress } from './sqliteAudit.ts';

// The SQLite store's tables and how a file of an older schema is brought up to this one. A file
// carries its version in `user_version` and Converge's mark in `application_id`, so a newer
// file or a foreign SQLite file is refused, never altered.

/** Bump with a migration in `migrations` below whenever the schema changes. */
export const sqliteSchemaVersion = 8;
/** 'CNVG': marks the file as a Converge store, so a foreign SQLite file is refused, not altered. */
const applicationId = 0x434e5647;

// Positions are INTEGER PRIMARY KEY AUTOINCREMENT, so SQLite never hands out a position twice,
// even after the newest rows are gone (plain rowids may be reused).
const schemaV1 = `
CREATE TABLE events (
  position INTEGER PRIMARY KEY AUTOINCREMENT,
  id       TEXT    NOT NULL UNIQUE,
  stream   TEXT    NOT NULL,
  revision INTEGER NOT NULL,
  type     TEXT    NOT NULL,
  data     TEXT    NOT NULL,
  metadata TEXT    NOT NULL,
  UNIQUE (stream, revision)
);
CREATE TABLE checkpoints (
  name     TEXT PRIMARY KEY,
  position INTEGER NOT NULL
) WITHOUT ROWID;
`;

/**
 * Event types with an index of their own (schema v2), so a subscription that wants only them
 * (the relay: SubscribeOptions.types) reads them without touching the rest of the log. Partial,
 * so the rows that make up nearly all of the log — reports and alives — add nothing to any
 * index and ingest pays nothing for it: the relay had read and decoded every event to find the
 * rare DeclarationSent.
 */
export const indexedTypes: ReadonlySet<string> = new Set(['DeclarationSent']);

/** migrations[v] turns a version-v file into version v+1, inside one transaction. */
const migrations: Readonly<Record<number, (db: Database.Database, onProgress?: AuditMigrationProgress) => void>> = {
  // v2: the partial index of indexedTypes. Building it reads the table once (a few seconds for
  // millions of events); nothing else changes, so a v1 file keeps every event and checkpoint.
  1: (db) => db.exec("CREATE INDEX events_declarations ON events (position) WHERE type = 'DeclarationSent'"),
  // v3: the sends of a stream by digest, for EventStore.findSend (ingest's rare lookup of a digest
  // older than the fold keeps). Partial, as v2's: reports and alives add nothing to it.
  2: (db) => db.exec(sentDigestIndex),
  // v4: the audit tree (sqliteAudit.ts): a leaf hash per row and the head row, computed over the
  // events already stored, in one transaction (about a second per million events).
  3: (db, onProgress) => migrateAuditTree(db, onProgress),
  // v5: the last-seen lease (docs/design.md §3 "Liveness as recorded"), overwritten in place.
  4: (db) =>
    db.exec(`
CREATE TABLE last_seen (node TEXT PRIMARY KEY, ms INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE last_seen_flushes (engine TEXT PRIMARY KEY, ms INTEGER NOT NULL) WITHOUT ROWID;`),
  // v6: the archive manifest (sqliteArchive.ts, docs/operations.md "Retention and archive"): the
  // segments closed history was moved to, and the store's identity that each segment names. IF NOT
  // EXISTS: a file a test took back to an older version keeps these tables, and nothing in them is lost.
  5: (db) => {
    db.exec(archiveSchemaV6);
    db.prepare('INSERT OR IGNORE INTO store_identity (id, identity) VALUES (1, ?)').run(randomUUID());
  },
  // v7: the archived sends (sqliteArchivedSends.ts): findSend's answer for a send moved out of
  // `events`. Segments archived before it have `sends` NULL until the next archive run, which knows
  // the archive folder, indexes them; a v6 store with no segment has nothing to fill.
  6: (db) => {
    db.exec(archivedSendsSchemaV7);
    const cols = db.prepare('SELECT name FROM pragma_table_info(?)').pluck().all('archive_segments') as string[];
    if (!cols.includes('sends')) db.exec('ALTER TABLE archive_segments ADD COLUMN sends INTEGER');
  },
  // v8: the segments' stream filters (sqliteStreamFilter.ts): a read of one node skips the segments
  // that cannot hold it. Segments archived before it have none and are opened, as before.
  7: (db) => db.exec(streamFilterSchemaV8),
};

const archiveSchemaV6 = `
CREATE TABLE IF NOT EXISTS archive_segments (
  file          TEXT    PRIMARY KEY,
  from_position INTEGER NOT NULL,
  to_position   INTEGER NOT NULL,
  events        INTEGER NOT NULL,
  sha256        TEXT    NOT NULL,
  bytes         INTEGER NOT NULL,
  raw_bytes     INTEGER NOT NULL,
  archived_at   TEXT    NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS store_identity (id INTEGER PRIMARY KEY CHECK (id = 1), identity TEXT NOT NULL);
`;

/** One row per DeclarationSent in a segment; findSend asks it on a miss in `events`. */
const archivedSendsSchemaV7 = `
CREATE TABLE IF NOT EXISTS archived_sends (
  stream   TEXT    NOT NULL,
  digest   TEXT    NOT NULL,
  position INTEGER NOT NULL,
  serial   INTEGER NOT NULL,
  sent_at  TEXT    NOT NULL,
  PRIMARY KEY (stream, digest, position)
) WITHOUT ROWID;
`;

/** A segment's stream filter, one row per bucket; a stream's read reads its bucket's rows only. */
const streamFilterSchemaV8 = `
CREATE TABLE IF NOT EXISTS archive_stream_filter (
  bucket INTEGER NOT NULL,
  file   TEXT    NOT NULL,
  bits   BLOB    NOT NULL,
  PRIMARY KEY (bucket, file)
) WITHOUT ROWID;
`;

/** Used by findSend's query, whose WHERE must repeat the expression and the type to use it. */
const sentDigestIndex = "CREATE INDEX events_sent_digest ON events (stream, json_extract(data, '$.digest')) WHERE type = 'DeclarationSent'";

/** Make a new file's tables, or migrate an older file to sqliteSchemaVersion; refuse a foreign or newer file. */
export function migrate(db: Database.Database, path: string, onProgress?: AuditMigrationProgress): void {
  const version = db.pragma('user_version', { simple: true }) as number;
  const appId = db.pragma('application_id', { simple: true }) as number;
  const tables = (db.prepare("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table'").get() as { n: number }).n;
  if (version === 0 && tables === 0) {
    // A new file is made as v1 and then migrated: one path to every version, run by every test.
    db.transaction(() => {
      db.exec(schemaV1);
      db.pragma(`application_id = ${applicationId}`);
      db.pragma('user_version = 1');
    }).immediate();
  } else if (appId !== applicationId) {
    throw new ConvergeError(
      'CONVERGE_ERR_STORE_SCHEMA',
      `sqlite:${path} is a SQLite file but not a Converge event store (application_id ${appId}); refusing to touch it`,
    );
  }
  const from = db.pragma('user_version', { simple: true }) as number;
  if (from > sqliteSchemaVersion) {
    throw new ConvergeError(
      'CONVERGE_ERR_STORE_SCHEMA',
      `sqlite:${path} has store schema v${from}, written by a newer Converge; this one reads up to v${sqliteSchemaVersion}. Upgrade Converge, or restore a backup`,
      { details: { found: from, supported: sqliteSchemaVersion } },
    );
  }
  for (let v = from; v < sqliteSchemaVersion; v++) {
    const step = migrations[v];
    if (step === undefined) {
      throw new ConvergeError(
        'CONVERGE_ERR_STORE_SCHEMA',
        `sqlite:${path} has store schema v${v} and there is no migration from it to v${v + 1}`,
        {
          details: { found: from, supported: sqliteSchemaVersion },
        },
      );
    }
    db.transaction(() => {
      // Another process sharing the file may have migrated it since we looked.
      if ((db.pragma('user_version', { simple: true }) as number) !== v) return;
      step(db, onProgress);
      db.pragma(`user_version = ${v + 1}`);
    }).immediate();
  }
  // Added at open with no version of their own, so the release before keeps opening the file (docs/store.md).
  ensureSegmentTimes(db);
  ensureSegmentSummaries(db);
  ensureSegmentOrder(db);
}
