// The conformance suite on SQLite in each of its ways to the disk (docs/store.md, SQLite
// durability): synchronous=FULL on the caller's thread (every command but serve), group commit
// (src/store/sqlite/walSync.ts) and the writer thread (src/store/sqlite/sqliteWriterThread.ts, serve's default).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import type { EventStore, SqliteEventStoreOptions } from '../../src/store/index.ts';
import { eventStoreContract } from './eventStore.contract.ts';

const dir = mkdtempSync(join(tmpdir(), 'converge-contract-sqlite-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const maxEventBytes = 64 * 1024;
const names: Record<NonNullable<SqliteEventStoreOptions['sync']>, string> = {
  full: 'sqlite',
  group: 'sqlite (group commit)',
  thread: 'sqlite (writer thread)',
};
let n = 0;
for (const sync of ['full', 'group', 'thread'] as const) {
  const paths = new WeakMap<EventStore, string>();
  const openAt = (path: string): EventStore => {
    const store = createSqliteEventStore(path, { maxEventBytes, pollMs: 50, sync });
    paths.set(store, path);
    return store;
  };
  eventStoreContract(names[sync], {
    create: async () => openAt(join(dir, `store-${n++}.db`)),
    reopen: async (closed) => openAt(paths.get(closed)!),
    maxEventBytes,
  });
}
