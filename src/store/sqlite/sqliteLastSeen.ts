import type Database from 'better-sqlite3';
import type { LastSeenRow, LastSeenTable } from '../port.ts';

// The last-seen table in the store's file (port.ts LastSeenTable): one row per node updated in
// place, and the time of the last flush. Written on this handle's connection a few times a
// minute, not through the writer thread: it is not the log, and a SIGKILL loses at most what
// changed since the last flush (docs/operations.md, --last-seen-flush-ms).
export function createSqliteLastSeen(conn: Database.Database): LastSeenTable {
  let ready = false;
  const init = (): void => {
    if (ready) return;
    conn.exec(`CREATE TABLE IF NOT EXISTS last_seen (node TEXT PRIMARY KEY, seen_ms INTEGER NOT NULL, silent INTEGER NOT NULL);
      CREATE TABLE IF NOT EXISTS last_seen_flush (id INTEGER PRIMARY KEY CHECK (id = 1), flushed_ms INTEGER NOT NULL);`);
    ready = true;
  };
  return {
    async load() {
      init();
      const rows = (
        conn.prepare('SELECT node, seen_ms, silent FROM last_seen').all() as { node: string; seen_ms: number; silent: number }[]
      ).map((r): LastSeenRow => ({ node: r.node, seenAt: Number(r.seen_ms), silent: r.silent !== 0 }));
      const f = conn.prepare('SELECT flushed_ms FROM last_seen_flush WHERE id = 1').get() as { flushed_ms: number } | undefined;
      return { rows, flushedAt: f === undefined ? null : Number(f.flushed_ms) };
    },
    async save(rows, flushedAt) {
      init();
      const upsert = conn.prepare(
        'INSERT INTO last_seen (node, seen_ms, silent) VALUES (?, ?, ?) ON CONFLICT(node) DO UPDATE SET seen_ms = excluded.seen_ms, silent = excluded.silent',
      );
      const flushed = conn.prepare(
        'INSERT INTO last_seen_flush (id, flushed_ms) VALUES (1, ?) ON CONFLICT(id) DO UPDATE SET flushed_ms = excluded.flushed_ms',
      );
      conn.transaction(() => {
        for (const r of rows) upsert.run(r.node, Math.round(r.seenAt), r.silent ? 1 : 0);
        flushed.run(Math.round(flushedAt));
      })();
    },
  };
}
