import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { eventLeafHash } from '../../src/core/audit/leaf.ts';
import { createTreeBuilder } from '../../src/core/audit/merkle.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { createPostgresEventStore } from '../../src/store/postgres/index.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import type { EventStore } from '../../src/store/port.ts';
import { verifyStore, writeHistory } from '../support/auditHistory.ts';
import { describeOnPostgres, scratchSchema } from '../support/postgres.ts';

// Every adapter that can keeps the audit tree in its appends (docs/audit.md): the leaf stored
// beside each row is the leaf of its stored bytes, and the head is the tree over all of them.

const dir = mkdtempSync(join(tmpdir(), 'converge-audit-'));
let n = 0;
const fresh = (): string => join(dir, `s${++n}.db`);

/** The tree recomputed from readStored, independently of verifyLog. */
async function recomputed(store: EventStore): Promise<{ size: bigint; root: string; leavesMatch: boolean }> {
  const tree = createTreeBuilder();
  let leavesMatch = true;
  let after: bigint | null = null;
  for (;;) {
    const page = await store.readStored({ after, limit: 7 });
    if (page.length === 0) break;
    for (const r of page) {
      const h = eventLeafHash(r);
      if (r.leafHash === null || !h.equals(Buffer.from(r.leafHash))) leavesMatch = false;
      tree.appendLeafHash(h);
    }
    after = page.at(-1)!.position;
  }
  return { size: BigInt(tree.size), root: tree.root().toString('hex'), leavesMatch };
}

async function keepsTheTree(store: EventStore): Promise<void> {
  const empty = await store.auditHead();
  assert.equal(empty.size, 0n);
  assert.equal(empty.root, createTreeBuilder().root().toString('hex'));
  await writeHistory(store, 5);
  // A retried append (ids stored already) adds no leaf.
  await writeHistory(store, 2);
  await writeHistory(store, 4, 1);
  const head = await store.auditHead();
  const again = await recomputed(store);
  assert.equal(head.size, 27n);
  assert.deepEqual({ size: head.size, root: head.root }, { size: again.size, root: again.root });
  assert.ok(again.leavesMatch, 'every stored leaf hash is the hash of its row');
  assert.equal((await verifyStore(store, 4)).finding, null);
}

test('memory keeps the audit tree in its appends', async () => keepsTheTree(createMemoryEventStore()));

for (const sync of ['full', 'group', 'thread'] as const) {
  test(`sqlite (sync ${sync}) keeps the audit tree in the append's transaction`, async () => {
    const path = fresh();
    const store = createSqliteEventStore(path, { sync });
    try {
      await keepsTheTree(store);
    } finally {
      await store.close();
    }
    // Another handle goes on from the stored frontier, not from the start.
    const reopened = createSqliteEventStore(path, { sync });
    try {
      await writeHistory(reopened, 3, 2);
      assert.equal((await reopened.auditHead()).size, 36n);
      assert.equal((await verifyStore(reopened)).finding, null);
    } finally {
      await reopened.close();
    }
  });
}

test('sqlite: an append that fails (wrong expected revision) leaves the tree as it was', async () => {
  const store = createSqliteEventStore(fresh());
  try {
    await writeHistory(store, 2);
    const before = await store.auditHead();
    await assert.rejects(store.append([{ stream: 'node-web-000', expected: 0n, events: [] }]));
    assert.deepEqual(await store.auditHead(), before);
    await writeHistory(store, 1, 1);
    assert.equal((await verifyStore(store)).finding, null);
  } finally {
    await store.close();
  }
});

test('sqlite: a v3 store is migrated to v4 with the tree over the events it holds, and gaps it made itself are not tamper', async () => {
  const path = fresh();
  const store = createSqliteEventStore(path);
  await writeHistory(store, 4);
  await store.close();
  // Back to v3 as the previous version wrote it: no leaf, no head, no last-seen lease (v5), and a position AUTOINCREMENT
  // skipped (an id already stored still took a number).
  const db = new Database(path);
  db.exec('DROP TABLE audit_head; ALTER TABLE events DROP COLUMN leaf; DROP TABLE last_seen; DROP TABLE last_seen_flushes;');
  db.exec("DELETE FROM events WHERE position = 5; UPDATE sqlite_sequence SET seq = 14 WHERE name = 'events'");
  db.pragma('user_version = 3');
  db.close();
  const progress: number[] = [];
  const migrated = createSqliteEventStore(path, { onAuditMigration: (done) => progress.push(done) });
  try {
    assert.deepEqual(progress, [11]);
    const head = await migrated.auditHead();
    assert.equal(head.size, 11n);
    assert.equal(head.denseFrom, 15n);
    assert.equal((await verifyStore(migrated)).finding, null);
    await writeHistory(migrated, 2, 1);
    const positions = (await migrated.readStored({ after: 12n })).map((r) => r.position);
    assert.deepEqual(positions, [15n, 16n, 17n, 18n, 19n, 20n]);
    assert.equal((await verifyStore(migrated)).finding, null);
  } finally {
    await migrated.close();
  }
});

describeOnPostgres('postgres audit tree', () => {
  test('postgres keeps the audit tree in the append statement, under the head lock', async () => {
    const scratch = scratchSchema();
    const store = createPostgresEventStore(scratch.url);
    try {
      await keepsTheTree(store);
    } finally {
      await store.close();
      await scratch.drop();
    }
  });
});

test("the adapters' leaf hash from stored text is leaf.ts's over the same bytes", async () => {
  const { storedLeafHash } = await import('../../src/store/audit/auditTree.ts');
  const cases: [bigint, string, bigint, string, string, string][] = [
    [1n, 'node-a', 0n, 'ReportReceived', '{"declared":"ab"}', '{"v":1}'],
    [2n ** 40n, 'node-ü\u{1F600}', 7n, 'AliveSeen', '{"x":"\\u0000é"}', ''],
    [3n, '', 0n, '', '', ''],
  ];
  for (const [position, stream, revision, type, data, metadata] of cases) {
    const want = eventLeafHash({ position, stream, revision, type, data: Buffer.from(data), metadata: Buffer.from(metadata) });
    assert.ok(storedLeafHash(position, stream, revision, type, data, metadata).equals(want), stream);
  }
  assert.throws(() => storedLeafHash(1n, 'a\ud800', 0n, 't', '', ''), RangeError);
});

test('sqlite: a store opened with auditTree: false (bench/audit only) writes no leaf, and verify says so', async () => {
  const path = fresh();
  const bare = createSqliteEventStore(path, { auditTree: false });
  try {
    await writeHistory(bare, 3);
    assert.equal((await bare.auditHead()).size, 0n);
    const result = await verifyStore(bare);
    assert.equal(result.finding?.kind, 'inserted');
  } finally {
    await bare.close();
  }
});

test('sqlite: readStored hands out the bytes of a leaf, data and metadata exactly as stored, whatever their type', async () => {
  const path = fresh();
  const store = createSqliteEventStore(path);
  try {
    await writeHistory(store, 2);
    const db = new Database(path);
    // The sends index reads data as JSON; these bytes are not.
    db.exec('DROP INDEX events_sent_digest');
    // Bytes that are not UTF-8, a NUL, and a leaf hash rewritten as text: each read back byte for byte.
    db.prepare('UPDATE events SET data = ?, metadata = ?, leaf = ? WHERE position = 1').run(
      Buffer.from([0xff, 0x00, 0xfe]),
      Buffer.from([]),
      'not a hash',
    );
    db.close();
    const [first] = await store.readStored({ limit: 1 });
    assert.deepEqual(Buffer.from(first!.data), Buffer.from([0xff, 0x00, 0xfe]));
    assert.deepEqual(Buffer.from(first!.metadata), Buffer.alloc(0));
    assert.deepEqual(Buffer.from(first!.leafHash!), Buffer.from('not a hash'));
    assert.equal((await verifyStore(store)).finding?.kind, 'changed');
  } finally {
    await store.close();
  }
});
