import assert from 'node:assert/strict';
import { copyFileSync, fstatSync, mkdtempSync, renameSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import type { TestContext } from 'node:test';
import { isConvergeError } from '../../src/core/errors.ts';
import { makeAliveSeen, makeDeclarationSent, streamOf } from '../../src/core/events/index.ts';
import type { Recorded } from '../../src/core/events/index.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { readNodeColumns } from '../../src/store/index.ts';
import type { EventStore, StreamWrite } from '../../src/store/index.ts';
import { testKey } from '../support/history.ts';
import { until } from '../support/until.ts';

// Group commit (src/store/sqlite/walSync.ts, docs/store.md Durability): with `sync: 'group'` a commit
// does not fsync; the WAL is fdatasynced afterwards on a libuv thread. These tests hold that sync
// pending (or fail it) through the injectable `walSync` and check the rules that make it as
// durable as synchronous=FULL: no append resolves, and nothing is read through the engine's own
// store, before the sync that covers it has succeeded; a failed sync fails what it covered and
// everything after. What they cannot check is the disk itself: power loss cannot be tested here.

const dir = mkdtempSync(join(tmpdir(), 'converge-group-commit-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

const powerLoss = (t: TestContext): void =>
  t.diagnostic('power loss cannot be tested here: these tests hold or fail the WAL sync, they do not cut the power');

/** A WAL sync the test releases or fails by hand, one call at a time. */
function heldSync(): {
  walSync: (fd: number) => Promise<void>;
  calls: number[];
  waiting: () => number;
  release: () => void;
  fail: (err: Error) => void;
} {
  const calls: number[] = [];
  const held: { resolve: () => void; reject: (e: Error) => void }[] = [];
  return {
    walSync: (fd) =>
      new Promise<void>((resolve, reject) => {
        calls.push(fd);
        held.push({ resolve, reject });
      }),
    calls,
    waiting: () => held.length,
    release: () => {
      for (const h of held.splice(0)) h.resolve();
    },
    fail: (err) => {
      for (const h of held.splice(0)) h.reject(err);
    },
  };
}

const aliveOf = (node: string, i: number): StreamWrite => ({
  stream: streamOf(node),
  expected: 'any',
  events: [makeAliveSeen({ node }, new Date(Date.UTC(2026, 10, 30, 10, 0, i)))],
});

/** Every event readAll hands over. */
async function all(store: EventStore): Promise<Recorded[]> {
  const out: Recorded[] = [];
  for await (const batch of store.readAll()) out.push(...batch);
  return out;
}

/** Some turns of the event loop and a few ms: long enough for anything not held to have happened. */
const aWhile = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 5));
};

function open(sync: ReturnType<typeof heldSync>): { store: EventStore; path: string } {
  const path = join(dir, `group-${n++}.db`);
  return { store: createSqliteEventStore(path, { sync: 'group', walSync: sync.walSync, pollMs: 20 }), path };
}

test('an append resolves only after a sync of the WAL file itself, started after its commit, has succeeded', async (t) => {
  powerLoss(t);
  const sync = heldSync();
  const { store, path } = open(sync);
  let resolved = false;
  const appended = store.append([aliveOf('a', 0)]).then((r) => ((resolved = true), r));
  await until('the sync to start', () => sync.waiting() === 1);
  await aWhile();
  assert.equal(resolved, false, 'resolved before its sync');
  // The descriptor synced is the WAL SQLite writes: same file.
  const fd = sync.calls[0]!;
  const s = fstatSync(fd);
  const wal = statSync(`${path}-wal`);
  assert.deepEqual([s.dev, s.ino], [wal.dev, wal.ino]);
  sync.release();
  assert.equal((await appended).position, 1n);
  await store.close();
});

test('appends committed while a sync runs wait for, and share, the next one', async (t) => {
  powerLoss(t);
  const sync = heldSync();
  const { store } = open(sync);
  const done: number[] = [];
  const first = store.append([aliveOf('a', 0)]).then(() => done.push(1));
  await until('the first sync', () => sync.waiting() === 1);
  const rest = [2, 3, 4].map((k) => store.append([aliveOf(`n${k}`, k)]).then(() => done.push(k)));
  await aWhile();
  assert.equal(sync.calls.length, 1, 'no second sync while one runs');
  sync.release();
  await first;
  await aWhile();
  assert.deepEqual(done, [1], 'the first sync started before the later commits: it does not cover them');
  await until('the shared second sync', () => sync.waiting() === 1);
  sync.release();
  await Promise.all(rest);
  assert.deepEqual(done, [1, 2, 3, 4]);
  assert.equal(sync.calls.length, 2, 'three commits, one sync');
  await store.close();
});

test('nothing past the oldest unsynced commit is read: readAll, readStream, headPosition, subscriptions, another handle', async (t) => {
  powerLoss(t);
  const sync = heldSync();
  const { store, path } = open(sync);
  const other = createSqliteEventStore(path, { pollMs: 20 });
  const decl = makeDeclarationSent({
    node: 'a',
    serial: 1,
    resources: [{ id: 'web' }],
    key: testKey,
    now: new Date('2026-11-30T10:00:00Z'),
  });
  // Position 1 synced; then the declaration (2) and an alive (3) committed, their sync held.
  const one = store.append([aliveOf('a', 0)]);
  await until('the first sync', () => sync.waiting() === 1);
  sync.release();
  await one;
  const seen: bigint[] = [];
  const declarations: bigint[] = [];
  const subs = [
    store.subscribe({ handler: (es) => void seen.push(...es.map((e) => e.position)) }),
    store.subscribe({ types: ['DeclarationSent'], handler: (es) => void declarations.push(...es.map((e) => e.position)) }),
    other.subscribe({ handler: (es) => void seen.push(...es.map((e) => -e.position)) }),
  ];
  await until('both subscriptions at position 1', () => seen.length === 2);
  const two = store.append([{ stream: streamOf('a'), expected: 'any', events: [decl] }]);
  await until('the second sync', () => sync.waiting() === 1);
  const three = store.append([aliveOf('b', 1)]);
  await aWhile();

  for (const s of [store, other]) {
    assert.deepEqual(
      (await all(s)).map((e) => e.position),
      [1n],
    );
    assert.deepEqual(
      (await s.readStream(streamOf('a'))).map((e) => e.position),
      [1n],
    );
    assert.deepEqual(
      (await s.readStream(streamOf('a'), { direction: 'backwards' })).map((e) => e.position),
      [1n],
    );
    assert.equal(await s.headPosition(), 1n);
  }
  assert.deepEqual(seen.sort(), [-1n, 1n]);
  assert.deepEqual(declarations, [], 'the relay would have published a declaration a power loss could take back');

  sync.release(); // covers 2 only: 3 was committed after it started
  await two;
  await until('the third sync', () => sync.waiting() === 1);
  assert.deepEqual(
    (await all(store)).map((e) => e.position),
    [1n, 2n],
  );
  await until('the declaration handed over', () => declarations.length === 1);
  assert.deepEqual(declarations, [2n]);
  sync.release();
  await three;
  await until('every subscription at position 3', () => seen.length === 6);
  assert.deepEqual(
    (await all(other)).map((e) => e.position),
    [1n, 2n, 3n],
  );
  await Promise.all(subs.map((s) => s.stop()));
  await other.close();
  await store.close();
});

test('a failed sync fails the appends it covered and every later one, and what they committed is never read', async (t) => {
  powerLoss(t);
  const sync = heldSync();
  const { store } = open(sync);
  const covered = store.append([aliveOf('a', 0)]);
  await until('the sync', () => sync.waiting() === 1);
  const next = store.append([aliveOf('a', 1)]);
  sync.fail(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' }));
  for (const p of [covered, next]) {
    await assert.rejects(p, (e: unknown) => isConvergeError(e, 'CONVERGE_ERR_STORE_UNAVAILABLE') && /EIO/.test((e as Error).message));
  }
  // Broken for good: a later sync succeeding would prove nothing of pages a failed one dropped.
  await assert.rejects(store.append([aliveOf('a', 2)]), (e: unknown) => isConvergeError(e, 'CONVERGE_ERR_STORE_UNAVAILABLE'));
  await assert.rejects(store.setCheckpoint('relay', 1n), (e: unknown) => isConvergeError(e, 'CONVERGE_ERR_STORE_UNAVAILABLE'));
  assert.equal(sync.calls.length, 1);
  assert.deepEqual(await all(store), []);
  assert.equal(await store.headPosition(), null);
  await store.close();
});

test('a WAL file replaced under the open store fails the next append instead of syncing a file SQLite does not write', async (t) => {
  powerLoss(t);
  const sync = heldSync();
  const { store, path } = open(sync);
  const first = store.append([aliveOf('a', 0)]);
  await until('the sync', () => sync.waiting() === 1);
  sync.release();
  await first;
  const wal = `${path}-wal`;
  renameSync(wal, `${wal}.moved`);
  copyFileSync(`${wal}.moved`, wal);
  await assert.rejects(
    store.append([aliveOf('a', 1)]),
    (e: unknown) => isConvergeError(e, 'CONVERGE_ERR_STORE_UNAVAILABLE') && /replaced/.test((e as Error).message),
  );
  assert.equal(sync.calls.length, 1, 'never synced the stranger');
  await store.close();
});

test('close waits for the sync of what is committed, and the append resolves', async (t) => {
  powerLoss(t);
  const sync = heldSync();
  const { store } = open(sync);
  const appended = store.append([aliveOf('a', 0)]);
  await until('the sync', () => sync.waiting() === 1);
  let closed = false;
  const closing = store.close().then(() => (closed = true));
  await aWhile();
  assert.equal(closed, false);
  sync.release();
  await closing;
  assert.equal((await appended).position, 1n);
});

test("the bulk folds' columnar read (readColumns) stops before the oldest unsynced commit, as readAll does", async (t) => {
  powerLoss(t);
  const sync = heldSync();
  const { store, path } = open(sync);
  const other = createSqliteEventStore(path);
  const positions = async (s: EventStore): Promise<number[]> => {
    const out: number[] = [];
    for await (const page of readNodeColumns(s)) for (let i = 0; i < page.length; i++) out.push(page.position[i]!);
    return out;
  };
  const one = store.append([aliveOf('a', 0)]);
  await until('the first sync', () => sync.waiting() === 1);
  sync.release();
  await one;
  const two = store.append([aliveOf('b', 1)]);
  await until('the second sync', () => sync.waiting() === 1);
  for (const s of [store, other]) assert.deepEqual(await positions(s), [1], 'position 2 is committed, not synced');
  sync.release();
  await two;
  for (const s of [store, other]) assert.deepEqual(await positions(s), [1, 2]);
  await other.close();
  await store.close();
});

test('a stream read backwards with a limit returns that many durable events when its newest are not yet synced', async (t) => {
  // The API's node history (readModel/queries.ts historyPage) reads 256 events back and stops at a
  // short page: when the newest were cut after the LIMIT, it ended early (or found no node at all).
  powerLoss(t);
  const sync = heldSync();
  const { store } = open(sync);
  for (let i = 0; i < 3; i++) {
    const p = store.append([aliveOf('a', i)]);
    await until('the sync', () => sync.waiting() === 1);
    sync.release();
    await p;
  }
  const held = store.append([aliveOf('a', 3)]);
  await until('the fourth commit waiting for its sync', () => sync.waiting() === 1);
  const revisions = async (opts: Parameters<EventStore['readStream']>[1]): Promise<bigint[]> =>
    (await store.readStream(streamOf('a'), opts)).map((e) => e.revision);
  assert.deepEqual(await revisions({ direction: 'backwards', limit: 1 }), [2n]);
  assert.deepEqual(await revisions({ direction: 'backwards', limit: 2 }), [2n, 1n]);
  assert.deepEqual(await revisions({ direction: 'backwards', limit: 2, fromRevision: 3n }), [2n, 1n]);
  assert.deepEqual(await revisions({ limit: 2, fromRevision: 1n }), [1n, 2n]);
  assert.deepEqual(await revisions({ limit: 3, fromRevision: 1n }), [1n, 2n]);
  sync.release();
  await held;
  assert.deepEqual(await revisions({ direction: 'backwards', limit: 1 }), [3n]);
  await store.close();
});
