import type Database from 'better-sqlite3';

// Tables added at open with no schema version of their own (docs/store.md): each is made only when
// the file lacks it, so opening a file that has it writes nothing, a read-only open included.

/** Whether the file has table `name`. */
export const hasTable = (db: Database.Database, name: string): boolean =>
  db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").pluck().get(name) !== undefined;

/** Make table `name` by `sql` when the file has none. */
export function ensureTable(db: Database.Database, name: string, sql: string): void {
  if (!hasTable(db, name)) db.exec(sql);
}
