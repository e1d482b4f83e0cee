import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { isConvergeError } from '../../src/core/errors.ts';
import { lockSqliteStoreForEngine } from '../../src/store/sqlite/sqliteEngineLock.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';

// One engine per SQLite file: the lock refuses a second holder (here a second connection in the
// same process, as SQLite locks per file, not per process), names the first, and frees on release.
// Across processes and SIGKILL: test/cli/serveSqliteLock.test.ts.

const dir = mkdtempSync(join(tmpdir(), 'converge-engine-lock-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('the engine lock is refused while held, names its holder, and is free again once released', async () => {
  const path = join(dir, 'sub', 'events.db');
  const lock = lockSqliteStoreForEngine(path);
  assert.throws(
    () => lockSqliteStoreForEngine(path),
    (e: unknown) =>
      isConvergeError(e, 'CONVERGE_ERR_STORE_IN_USE') && e.message.includes(`pid ${process.pid} on `) && e.message.includes(path),
  );
  // The store file itself stays open to everyone.
  const store = createSqliteEventStore(path);
  assert.equal(await store.headPosition(), null);
  await store.close();
  lock.release();
  lockSqliteStoreForEngine(path).release();
});
