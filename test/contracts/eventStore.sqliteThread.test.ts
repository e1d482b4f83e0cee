// The conformance suite again on SQLite with its writer thread (src/store/sqliteWriterThread.ts), as `serve` runs it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { createSqliteEventStore } from '../../src/store/sqliteEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { eventStoreContract } from './eventStore.contract.ts';

const dir = mkdtempSync(join(tmpdir(), 'converge-contract-sqlite-thread-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const maxEventBytes = 64 * 1024;
const paths = new WeakMap<EventStore, string>();
let n = 0;
const openAt = (path: string): EventStore => {
  const store = createSqliteEventStore(path, { maxEventBytes, pollMs: 50, sync: 'thread' });
  paths.set(store, path);
  return store;
};

eventStoreContract('sqlite (writer thread)', {
  create: async () => openAt(join(dir, `store-${n++}.db`)),
  reopen: async (closed) => openAt(paths.get(closed)!),
  maxEventBytes,
});
