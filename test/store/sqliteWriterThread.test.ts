// The SQLite store's writer thread (sync: 'thread', serve's default; src/store/sqlite/sqliteWriterThread.ts)
// and EventStore.pipeline on every SQLite mode: what the store contract cannot see from outside.
import { setImmediate as nextTurn } from 'node:timers/promises';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { isConvergeError } from '../../src/core/errors.ts';
import { uuidV5 } from '../../src/core/events/index.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { startWriterThread } from '../../src/store/sqlite/sqliteWriterClient.ts';
import type { NewEvent, StreamWrite } from '../../src/store/index.ts';

const dir = mkdtempSync(join(tmpdir(), 'converge-writer-thread-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const fresh = (): string => join(dir, `store-${n++}.db`);

const alive = (node: string, i: number): NewEvent =>
  ({
    id: uuidV5(`writer-thread/${node}/${i}`),
    type: 'AliveSeen',
    data: { node, seenAt: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString() },
  }) as NewEvent;
const write = (node: string, expected: StreamWrite['expected'], ...is: number[]): StreamWrite => ({
  stream: `node-${node}`,
  expected,
  events: is.map((i) => alive(node, i)),
});

test('appends queued together are written in one go, yet one that fails costs the others nothing', async () => {
  const store = createSqliteEventStore(fresh(), { sync: 'thread' });
  try {
    // Posted in one turn: the thread finds them queued together and writes them in one transaction.
    const outcomes = await Promise.allSettled([
      store.append([write('a', 'no_stream', 0, 1)]),
      store.append([write('a', 0n, 2)]), // wrong: the first call moved node-a to revision 1
      store.append([write('b', 'any', 0)]),
      store.append([write('a', 1n, 3)]),
    ]);
    assert.deepEqual(
      outcomes.map((o) => o.status),
      ['fulfilled', 'rejected', 'fulfilled', 'fulfilled'],
    );
    const refused = (outcomes[1] as PromiseRejectedResult).reason;
    assert.ok(isConvergeError(refused, 'CONVERGE_ERR_WRONG_EXPECTED_REVISION'), String(refused));
    const a = await store.readStream('node-a');
    assert.deepEqual(
      a.map((e) => [e.id, e.revision]),
      [
        [alive('a', 0).id, 0n],
        [alive('a', 1).id, 1n],
        [alive('a', 3).id, 2n],
      ],
    );
    const last = (outcomes[3] as PromiseFulfilledResult<Awaited<ReturnType<typeof store.append>>>).value;
    assert.deepEqual(last.streams, [{ stream: 'node-a', nextExpected: 2n, written: 1 }]);
    assert.equal(last.position, (await store.headPosition())!);
  } finally {
    await store.close();
  }
});

test('an append answered by the thread is already visible to reads, and to a live subscription', async () => {
  const store = createSqliteEventStore(fresh(), { sync: 'thread', pollMs: 60_000 });
  const seen: bigint[] = [];
  const sub = store.subscribe({ handler: (events) => void seen.push(...events.map((e) => e.position)) });
  try {
    for (let i = 0; i < 5; i++) {
      const r = await store.append([write('v', 'any', i)]);
      assert.equal((await store.readStream('node-v')).length, i + 1);
      assert.equal(await store.headPosition(), r.position);
    }
    // pollMs is a minute: only the wake-up the append gives reaches the subscription in time.
    for (let i = 0; i < 200 && seen.length < 5; i++) await new Promise((r) => setTimeout(r, 5));
    assert.deepEqual(seen, [1n, 2n, 3n, 4n, 5n]);
  } finally {
    await sub.stop();
    await store.close();
  }
});

test("a live subscription gets every event, another handle's among this one's, while the thread is still answering", async () => {
  // Past its tail, with appends in flight, the subscription waits for the thread's answer rather
  // than read the file; another writer's event then shows as a gap in the tail and is read there.
  const path = fresh();
  const store = createSqliteEventStore(path, { sync: 'thread', pollMs: 20 });
  const other = createSqliteEventStore(path);
  const seen: bigint[] = [];
  const sub = store.subscribe({ handler: (events) => void seen.push(...events.map((e) => e.position)) });
  try {
    const mine: Promise<unknown>[] = [];
    for (let i = 0; i < 40; i++) {
      mine.push(store.append([write('mine', 'any', i)]));
      if (i % 10 === 5) await other.append([write(`theirs${i}`, 'any', 0)]);
      if (i % 3 === 0) await nextTurn();
    }
    await Promise.all(mine);
    for (let i = 0; i < 400 && seen.length < 44; i++) await new Promise((r) => setTimeout(r, 5));
    assert.deepEqual(
      seen,
      Array.from({ length: 44 }, (_, i) => BigInt(i + 1)),
    );
  } finally {
    await sub.stop();
    await other.close();
    await store.close();
  }
});

for (const sync of ['thread', 'group', 'full'] as const) {
  test(`a pipeline (sync ${sync}) refuses every call after one that failed, untried; other appends go on`, async () => {
    const store = createSqliteEventStore(fresh(), { sync });
    try {
      const pipe = store.pipeline!();
      const calls = [
        pipe.append([write('p', 'no_stream', 0)]),
        pipe.append([write('p', 5n, 1)]), // fails: node-p is at revision 0
        pipe.append([write('p', 'any', 2)]), // would succeed alone: refused, so it cannot overtake the failed one
        pipe.append([write('q', 'any', 0)]),
      ];
      const outcomes = await Promise.allSettled(calls);
      assert.deepEqual(
        outcomes.map((o) => o.status),
        ['fulfilled', 'rejected', 'rejected', 'rejected'],
      );
      assert.ok(isConvergeError((outcomes[1] as PromiseRejectedResult).reason, 'CONVERGE_ERR_WRONG_EXPECTED_REVISION'));
      for (const o of outcomes.slice(2)) {
        const err = (o as PromiseRejectedResult).reason;
        assert.ok(isConvergeError(err, 'CONVERGE_ERR_STORE_UNAVAILABLE'), String(err));
        assert.match(err.message, /not tried/);
      }
      await assert.rejects(pipe.append([write('q', 'any', 1)]), /not tried/);
      assert.deepEqual(
        (await store.readStream('node-p')).map((e) => e.id),
        [alive('p', 0).id],
      );
      assert.deepEqual(await store.readStream('node-q'), []);
      // A plain append and a new pipeline are not held by the failed one.
      await store.append([write('p', 'any', 2)]);
      await store.pipeline!().append([write('q', 'any', 0)]);
      assert.equal((await store.readStream('node-p')).length, 2);
      assert.equal((await store.readStream('node-q')).length, 1);
    } finally {
      await store.close();
    }
  });
}

test('close writes and answers every append still queued for the thread', async () => {
  const path = fresh();
  const store = createSqliteEventStore(path, { sync: 'thread' });
  const calls = Array.from({ length: 50 }, (_, i) => store.append([write(`c${i % 7}`, 'any', i)]));
  await store.close();
  const results = await Promise.all(calls);
  assert.equal(results.filter((r) => r.position !== null).length, 50);
  const reopened = createSqliteEventStore(path);
  try {
    assert.equal(await reopened.headPosition(), 50n);
  } finally {
    await reopened.close();
  }
});

test('a writer thread that cannot open its store fails each append with the reason, and hangs nothing', async () => {
  const client = startWriterThread({ path: join(dir, 'no-such-folder', 'events.db'), busyTimeoutMs: 100 });
  const err = await client.append([], 0).then(
    () => null,
    (e: unknown) => e,
  );
  assert.ok(isConvergeError(err, 'CONVERGE_ERR_STORE_UNAVAILABLE'), String(err));
  assert.match((err as Error).message, /open sqlite:.*no-such-folder.* for writing/);
  await client.close();
});

test('a store left open does not keep the process alive once the thread has answered everything', () => {
  // A child appends and never closes: it must exit by itself, as it would with the store on the event loop.
  const script = fileURLToPath(new URL('./fixtures/sqliteThreadLeftOpen.ts', import.meta.url));
  const r = spawnSync(process.execPath, ['--import', 'tsx', script, fresh()], { encoding: 'utf8', timeout: 30_000 });
  assert.equal(r.signal, null, `the child was killed after 30 s: the writer thread held it (stderr: ${r.stderr})`);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /appended 3/);
});
