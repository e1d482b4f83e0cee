import type Database from 'better-sqlite3';
import type { TreeBuilder } from '../../core/audit/merkle.ts';
import { createTreeBuilder, resumeTree, storedLeafHash } from '../audit/auditTree.ts';
import type { AuditHead, ReadStoredOptions, StoredRecord } from '../port.ts';

// The SQLite store's audit tree (docs/audit.md): each row's leaf hash in `events.leaf`, and the
// tree's head and frontier in the one row of `audit_head`, both written in the append's
// transaction by the writer (sqliteWriter.ts), so a commit holds its rows and the tree over them.

/** Schema v3: the leaf column and the head row, and the tree over the events already stored. */
export const auditSchemaV3 = `
ALTER TABLE events ADD COLUMN leaf BLOB;
CREATE TABLE audit_head (
  id         INTEGER PRIMARY KEY CHECK (id = 1),
  size       INTEGER NOT NULL,
  root       BLOB    NOT NULL,
  frontier   BLOB    NOT NULL,
  dense_from INTEGER NOT NULL
);
`;

/** Events hashed per read during the migration: a page is read, then its leaves written. */
const migratePage = 10_000;

/** Progress of the migration that hashes a store's existing events: `done` of `total`. */
export type AuditMigrationProgress = (done: number, total: number) => void;

/**
 * Hash every stored event into the tree, in position order, inside the migration's transaction.
 * Positions below the first the writer will hand out (the sequence's next) may have gaps the
 * store made itself (an id already stored still took a number), so dense_from starts there.
 */
export function migrateAuditTree(db: Database.Database, onProgress?: AuditMigrationProgress): void {
  db.exec(auditSchemaV3);
  const total = Number(db.prepare('SELECT count(*) FROM events').pluck().get());
  const page = db
    .prepare('SELECT position, stream, revision, type, data, metadata FROM events WHERE position > ? ORDER BY position LIMIT ?')
    .raw()
    .safeIntegers();
  const setLeaf = db.prepare('UPDATE events SET leaf = ? WHERE position = ?');
  const tree = createTreeBuilder();
  const leaf = Buffer.alloc(32);
  let after = 0n;
  for (;;) {
    const rows = page.all(after, migratePage) as [bigint, string, bigint, string, string, string][];
    if (rows.length === 0) break;
    for (const [position, stream, revision, type, data, metadata] of rows) {
      storedLeafHash(position, stream, revision, type, data, metadata, leaf);
      tree.appendLeafHash(leaf);
      setLeaf.run(leaf, position);
      after = position;
    }
    onProgress?.(tree.size, total);
  }
  db.prepare('INSERT INTO audit_head (id, size, root, frontier, dense_from) VALUES (1, ?, ?, ?, ?)').run(
    tree.size,
    tree.root(),
    tree.frontier(),
    nextPosition(db),
  );
}

/** The position the next insert takes: past every position the table's sequence ever gave. */
const nextPosition = (db: Database.Database): bigint =>
  db
    .prepare(
      "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0), coalesce((SELECT max(position) FROM events), 0)) + 1",
    )
    .pluck()
    .safeIntegers()
    .get() as bigint;

/**
 * The writer's side: the tree and the next position, loaded once the write lock is held and kept
 * across this connection's transactions while no other connection commits (as the revisions are).
 */
export type SqliteAuditWriter = Readonly<{
  /** Inside the write transaction: reload unless what is held is still the file's. */
  load: (fresh: boolean) => void;
  /** The position the next inserted row takes. */
  nextPosition: () => bigint;
  /**
   * The leaf of a row about to be inserted at nextPosition(); `take` it once the insert wrote a row.
   * One buffer, written again by the next call: the insert copies it, and so does the tree.
   */
  leafOf: (stream: string, revision: bigint, type: string, data: string, metadata: string) => Buffer | null;
  take: (leaf: Buffer | null) => void;
  /** Where the call started, to go back to if it fails (its savepoint rolls the rows back). */
  mark: () => () => void;
  /** Write the head row; once per call that wrote rows. */
  save: () => void;
  /** The transaction rolled back: what is held is no longer the file's. */
  forget: () => void;
}>;

export function createSqliteAuditWriter(conn: Database.Database, keepTree = true): SqliteAuditWriter {
  const q = {
    head: conn.prepare('SELECT size, frontier FROM audit_head WHERE id = 1').raw(),
    save: conn.prepare('UPDATE audit_head SET size = ?, root = ?, frontier = ? WHERE id = 1'),
  };
  let tree: TreeBuilder | null = null;
  const leaf = Buffer.alloc(32);
  let loaded = false;
  let next = 0n;
  return {
    load(fresh) {
      if (loaded && !fresh) return;
      if (keepTree) {
        const row = q.head.get() as [number, Buffer] | undefined;
        if (row === undefined) throw new Error('the store has no audit_head row: its schema is older than v3');
        tree = resumeTree(row[0], row[1]);
      }
      next = nextPosition(conn);
      loaded = true;
    },
    nextPosition: () => next,
    leafOf: (stream, revision, type, data, metadata) =>
      keepTree ? storedLeafHash(next, stream, revision, type, data, metadata, leaf) : null,
    take(hash) {
      if (hash !== null) tree!.appendLeafHash(hash);
      next += 1n;
    },
    mark() {
      // The frontier as one Buffer, not compactRange()'s Buffer a level: this runs on every call.
      const size = tree?.size ?? 0;
      const frontier = tree?.frontier() ?? null;
      const at = next;
      return () => {
        if (frontier !== null) tree = resumeTree(size, frontier);
        next = at;
      };
    },
    save() {
      if (tree !== null) q.save.run(tree.size, tree.root(), tree.frontier());
    },
    forget() {
      tree = null;
      loaded = false;
    },
  };
}

/** The reads of `converge audit verify` on this store's reading connection. */
export function createSqliteAuditReads(conn: Database.Database): {
  auditHead: () => AuditHead;
  readStored: (options?: ReadStoredOptions) => StoredRecord[];
} {
  const q = {
    head: conn.prepare('SELECT size, root, dense_from FROM audit_head WHERE id = 1').raw().safeIntegers(),
    // CAST AS BLOB: the bytes as stored, whatever a writer put in the column. The leaf hash, data
    // and metadata come as one blob cut by their lengths: better-sqlite3 copies every blob into a
    // buffer of its own, and three of them a row were most of verify's reading and its collection.
    // (`||` joins them as text, which in a UTF-8 file keeps every byte; the CAST makes it a blob again.)
    stored: conn
      .prepare(
        "SELECT position, id, stream, revision, type, CAST(coalesce(CAST(leaf AS BLOB), x'') || coalesce(CAST(data AS BLOB), x'') || coalesce(CAST(metadata AS BLOB), x'') AS BLOB), " +
          'length(CAST(leaf AS BLOB)), coalesce(length(CAST(data AS BLOB)), 0) FROM events WHERE position > ? ORDER BY position LIMIT ?',
      )
      .raw()
      .safeIntegers(),
  };
  return {
    auditHead() {
      const [size, root, denseFrom] = q.head.get() as [bigint, Buffer, bigint];
      return { size, root: root.toString('hex'), denseFrom, keptByStore: true };
    },
    readStored(options = {}) {
      const rows = q.stored.all(options.after ?? 0n, options.limit ?? 1000) as [
        bigint,
        string,
        string,
        bigint,
        string,
        Buffer | null,
        bigint | null,
        bigint,
      ][];
      return rows.map(([position, id, stream, revision, type, bytes, leafLength, dataLength]) => {
        const all = bytes ?? Buffer.alloc(0);
        const leafEnd = leafLength === null ? 0 : Number(leafLength);
        const dataEnd = leafEnd + Number(dataLength);
        return {
          position,
          id,
          stream,
          revision,
          type,
          data: all.subarray(leafEnd, dataEnd),
          metadata: all.subarray(dataEnd),
          leafHash: leafLength === null ? null : all.subarray(0, leafEnd),
        };
      });
    },
  };
}
