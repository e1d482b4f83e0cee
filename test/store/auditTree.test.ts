import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { eventLeafHash, eventLeafHashInto, leafBytes } from '../../src/core/audit/leaf.ts';
import { createTreeBuilder } from '../../src/core/audit/merkle.ts';
import { makeAliveSeen, streamOf } from '../../src/core/events/index.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { createPostgresEventStore } from '../../src/store/postgres/index.ts';
import { createSqliteEventStore, withoutAuditTreeKey } from '../../src/store/sqlite/sqliteEventStore.ts';
import type { EventStore, NewEvent } from '../../src/store/port.ts';
import { verifyStore, writeHistory } from '../support/auditHistory.ts';
import { describeOnPostgres, scratchSchema } from '../support/postgres.ts';
import { tempDir } from '../support/tempDir.ts';

// Every adapter that can keeps the audit tree in its appends (docs/audit.md): the leaf stored
// beside each row is the leaf of its stored bytes, and the head is the tree over all of them.

const dir = tempDir({ after }, 'converge-audit-');
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

for (const sync of ['full', 'thread'] as const) {
  test(`sqlite (sync ${sync}): a call that wrote rows and then failed leaves the tree as it was, and appends go on from it`, async () => {
    // The writer marks the tree before each call and goes back to the mark when the call fails after
    // rows were hashed in; on the writer thread, calls that wait together share a transaction (each
    // in a savepoint), so the transaction, and the tree it holds, go on after the failed one.
    const store = createSqliteEventStore(fresh(), { sync });
    try {
      await writeHistory(store, 3);
      const before = await store.auditHead();
      const alive = (node: string, second: number): NewEvent => makeAliveSeen({ node }, new Date(Date.UTC(2026, 1, 1, 0, 0, second)));
      const failing = store.append([
        { stream: streamOf('new-1'), expected: 'no_stream', events: [alive('new-1', 1), alive('new-1', 2)] },
        { stream: streamOf('web-000'), expected: 0n, events: [alive('web-000', 3)] },
      ]);
      const alongside = store.append([{ stream: streamOf('new-3'), expected: 'no_stream', events: [alive('new-3', 4)] }]);
      await assert.rejects(failing);
      await alongside;
      const after = await store.auditHead();
      assert.equal(after.size, before.size + 1n);
      await writeHistory(store, 1, 3);
      assert.equal((await verifyStore(store)).finding, null);
      const again = await recomputed(store);
      assert.deepEqual(
        { size: (await store.auditHead()).size, root: (await store.auditHead()).root },
        { size: again.size, root: again.root },
      );
    } finally {
      await store.close();
    }
  });
}

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

test("the fast leaf encodings (append's from text, verify's into a page) hash leafBytes's bytes, whatever the fields", async () => {
  const { storedLeafHash } = await import('../../src/store/audit/auditTree.ts');
  // Short and long text (the ASCII copy stops past 24 characters), any code point, positions on either
  // side of 2^53 (the fast paths write numbers up to it), and each hash written into a reused buffer.
  const text = fc.oneof(
    fc.string({ maxLength: 12 }),
    fc.string({ unit: 'binary', maxLength: 12 }),
    fc.string({ minLength: 20, maxLength: 30 }),
    fc.string({ unit: 'binary', minLength: 20, maxLength: 30 }),
    fc.string({ minLength: 90, maxLength: 300 }),
  );
  const u64 = fc.oneof(fc.bigInt({ min: 0n, max: 2n ** 53n + 2n }), fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }));
  const into = Buffer.alloc(32);
  const page = new Uint8Array(96);
  fc.assert(
    fc.property(u64, text, u64, text, text, text, (position, stream, revision, type, data, metadata) => {
      const fields = { position, stream, revision, type, data: Buffer.from(data), metadata: Buffer.from(metadata) };
      const want = createHash('sha256')
        .update(Buffer.from([0]))
        .update(leafBytes(fields))
        .digest();
      assert.ok(storedLeafHash(position, stream, revision, type, data, metadata).equals(want));
      assert.ok(storedLeafHash(position, stream, revision, type, data, metadata, into).equals(want));
      assert.ok(eventLeafHash(fields).equals(want));
      eventLeafHashInto(fields, page, 32);
      assert.ok(Buffer.from(page.subarray(32, 64)).equals(want));
    }),
    { numRuns: 2_000 },
  );
  // Past the scratch (4 MiB) both take leaf.ts's own path.
  const big = 'x'.repeat(5 << 20);
  const want = createHash('sha256')
    .update(Buffer.from([0]))
    .update(leafBytes({ position: 1n, stream: 's', revision: 0n, type: 't', data: Buffer.from(big), metadata: Buffer.from('m') }))
    .digest();
  assert.ok(storedLeafHash(1n, 's', 0n, 't', big, 'm').equals(want));
});

// bench/engine.ts measures ingest without the tree by preloading a module that sets this global into
// one serve (BENCH_WITHOUT_AUDIT_TREE); nothing else reaches it, and a store opened without it keeps the tree.
test('sqlite: the bench-only global turns the tree off for stores opened while it is set, and only then', async () => {
  const key = withoutAuditTreeKey;
  const g = globalThis as Record<symbol, unknown>;
  g[key] = true;
  const without = fresh();
  try {
    const store = createSqliteEventStore(without, { sync: 'thread' });
    await writeHistory(store, 2);
    assert.equal((await store.auditHead()).size, 0n);
    assert.equal((await store.readStored({ after: null, limit: 10 }))[0]!.leafHash, null);
    await store.close();
  } finally {
    delete g[key];
  }
  const store = createSqliteEventStore(fresh(), { sync: 'thread' });
  await writeHistory(store, 2);
  const head = await store.auditHead();
  assert.equal(head.size, 6n);
  assert.deepEqual(await recomputed(store), { size: head.size, root: head.root, leavesMatch: true });
  await store.close();
});
