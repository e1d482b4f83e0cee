import { mkdirSync } from 'node:fs';
import { hostname } from 'node:os';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { ConvergeError } from '../../core/errors.ts';

// One engine per SQLite file. Two `serve` processes on one file would share ingest
// safely (mesh.reports has a single active consumer) but both would run the relay — an SQLite
// store has no relay lease — and publish every declaration twice. So `serve` holds this lock for
// its whole life and a second one is refused at start, naming the holder.
//
// The lock is SQLite's own, on a small file beside the store (`<store>.engine-lock`, WAL): the
// holder keeps a write transaction open (BEGIN IMMEDIATE takes the WAL write lock), which another
// connection — in this process or any other — cannot take while it lives. The lock is a POSIX
// lock the kernel drops when the holder's process ends, however it ends, so a SIGKILLed engine
// leaves nothing to clean up. The holder's pid, host and start time are committed first, so the
// refused engine (a reader, which WAL allows) can say who holds the file. The store file itself
// stays open to everyone: read commands and `converge send` still share it.

export type EngineLock = Readonly<{ path: string; release: () => void }>;

type Holder = { pid: number; host: string; since: string };

export const engineLockPathOf = (storePath: string): string => `${storePath}.engine-lock`;

const isBusy = (e: unknown): boolean => {
  const code = (e as { code?: unknown }).code;
  return code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED';
};

/** Take the engine lock of the SQLite store at `storePath`, or throw CONVERGE_ERR_STORE_IN_USE. */
export function lockSqliteStoreForEngine(storePath: string): EngineLock {
  const path = engineLockPathOf(storePath);
  mkdirSync(dirname(path), { recursive: true });
  const db = new Database(path, { timeout: 0 });
  try {
    db.pragma('journal_mode = WAL');
    db.exec('CREATE TABLE IF NOT EXISTS holder (one INTEGER PRIMARY KEY CHECK (one = 1), pid INTEGER, host TEXT, since TEXT)');
    db.exec('BEGIN IMMEDIATE');
  } catch (e) {
    if (!isBusy(e)) {
      db.close();
      throw new ConvergeError('CONVERGE_ERR_STORE_UNAVAILABLE', `cannot open the engine lock ${path}: ${(e as Error).message}`, {
        cause: e,
      });
    }
    let holder: Holder | undefined;
    try {
      holder = db.prepare('SELECT pid, host, since FROM holder WHERE one = 1').get() as Holder | undefined;
    } catch {
      // the holder has not committed its row yet
    }
    db.close();
    const who = holder === undefined ? 'another process' : `pid ${holder.pid} on ${holder.host}, since ${holder.since}`;
    throw new ConvergeError(
      'CONVERGE_ERR_STORE_IN_USE',
      `store ${storePath} is in use by another converge serve (${who}); an SQLite store takes one engine: stop that one first, or run several engines on a shared PostgreSQL store (docs/operations.md, "Scaling out")`,
      { details: { store: storePath, lock: path, ...(holder === undefined ? {} : { holder }) } },
    );
  }
  // Who holds it, for the next one refused: written inside the transaction, committed, and the
  // write lock taken again at once. Between the two, another engine could slip in; then this one
  // is the one refused (its BEGIN fails busy), never both running.
  try {
    db.prepare('INSERT OR REPLACE INTO holder (one, pid, host, since) VALUES (1, ?, ?, ?)').run(
      process.pid,
      hostname(),
      new Date().toISOString(),
    );
    db.exec('COMMIT');
    db.exec('BEGIN IMMEDIATE');
  } catch (e) {
    db.close();
    if (isBusy(e)) return lockSqliteStoreForEngine(storePath);
    throw e;
  }
  let released = false;
  return {
    path,
    release: () => {
      if (released) return;
      released = true;
      db.exec('ROLLBACK');
      db.close();
    },
  };
}
