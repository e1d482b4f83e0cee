import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { isConvergeError } from '../../src/core/errors.ts';
import { makeAliveSeen, streamOf } from '../../src/core/events/index.ts';
import { mountTinyTmpfs } from '../support/faults/tinyTmpfs.ts';
import { withStoreFaults } from '../support/faults/withStoreFaults.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import type { EventStore, StreamWrite } from '../../src/store/index.ts';

const aliveWrite = (node: string, i: number): StreamWrite => ({
  stream: streamOf(node),
  expected: 'any',
  events: [makeAliveSeen({ node }, new Date(Date.UTC(2026, 0, 1, 0, 0, i)))],
});

const count = async (store: EventStore): Promise<number> => {
  let n = 0;
  for await (const batch of store.readAll()) n += batch.length;
  return n;
};

test('failAppends refuses appends with CONVERGE_ERR_STORE_UNAVAILABLE and writes nothing until lifted', async () => {
  const store = withStoreFaults(createMemoryEventStore());
  await store.append([aliveWrite('n1', 1)]);
  store.faults.failAppends(true);
  for (let i = 2; i < 5; i++) {
    await assert.rejects(store.append([aliveWrite('n1', i)]), (e) => isConvergeError(e, 'CONVERGE_ERR_STORE_UNAVAILABLE'));
  }
  assert.equal(await count(store), 1);
  store.faults.failAppends(false);
  await store.append([aliveWrite('n1', 5)]);
  assert.equal(await count(store), 2);
  assert.deepEqual(store.faults.counters(), { appendsPassed: 2, appendsFailed: 3, appendAcksLost: 0, readsFailed: 0 });
});

test('failAppends(n) fails exactly the next n appends', async () => {
  const store = withStoreFaults(createMemoryEventStore());
  store.faults.failAppends(2);
  const outcomes: boolean[] = [];
  for (let i = 0; i < 4; i++)
    outcomes.push(
      await store.append([aliveWrite('n1', i)]).then(
        () => true,
        () => false,
      ),
    );
  assert.deepEqual(outcomes, [false, false, true, true]);
});

test('a lost append ack leaves the event stored, and retrying the same append does not duplicate it', async () => {
  const store = withStoreFaults(createMemoryEventStore());
  const w = aliveWrite('n1', 1);
  store.faults.loseAppendAcks(1);
  await assert.rejects(store.append([w]), (e) => isConvergeError(e, 'CONVERGE_ERR_STORE_UNAVAILABLE'));
  assert.equal(await count(store), 1);
  const retry = await store.append([w]);
  assert.equal(retry.streams[0]?.written, 0);
  assert.equal(await count(store), 1);
});

test('failReads fails reads with the same code; subscriptions and checkpoints pass through', async () => {
  const store = withStoreFaults(createMemoryEventStore());
  await store.append([aliveWrite('n1', 1)]);
  store.faults.failReads(true);
  await assert.rejects(store.readStream(streamOf('n1')), (e) => isConvergeError(e, 'CONVERGE_ERR_STORE_UNAVAILABLE'));
  await assert.rejects(store.headPosition(), (e) => isConvergeError(e, 'CONVERGE_ERR_STORE_UNAVAILABLE'));
  await assert.rejects(count(store), (e) => isConvergeError(e, 'CONVERGE_ERR_STORE_UNAVAILABLE'));
  store.faults.failReads(false);
  assert.equal((await store.readStream(streamOf('n1'))).length, 1);
  assert.equal(store.faults.counters().readsFailed, 3);
});

// A real full disk, where the machine allows mounting one (root on Linux; CI runs as root).
test('a SQLite store on a full tmpfs fails appends with CONVERGE_ERR_STORE_UNAVAILABLE and keeps what it acknowledged', async (t) => {
  const tmpfs = mountTinyTmpfs(256);
  if ('unavailable' in tmpfs) {
    console.warn(`\n*** SKIPPING the full-disk SQLite test: ${tmpfs.unavailable} ***\n`);
    t.skip(tmpfs.unavailable);
    return;
  }
  const node = `n${'x'.repeat(200)}`;
  const path = join(tmpfs.dir, 'events.db');
  let acknowledged = 0;
  try {
    const store = createSqliteEventStore(path);
    let failure: unknown = null;
    try {
      // Big-ish events fill 256 KiB quickly; every acknowledged append must survive.
      for (let i = 0; i < 10_000 && failure === null; i++) {
        const events = Array.from({ length: 20 }, (_, j) => makeAliveSeen({ node }, new Date(Date.UTC(2026, 0, 1) + (i * 20 + j) * 1000)));
        try {
          await store.append([{ stream: streamOf(node), expected: 'any', events }]);
          acknowledged += events.length;
        } catch (e) {
          failure = e;
        }
      }
      assert.ok(isConvergeError(failure, 'CONVERGE_ERR_STORE_UNAVAILABLE'), `expected STORE_UNAVAILABLE, got ${String(failure)}`);
      assert.match((failure as Error).message, /full/i);
      assert.ok(acknowledged > 0);
      assert.equal(await count(store), acknowledged);
    } finally {
      await store.close().catch(() => undefined);
    }
    const reopened = createSqliteEventStore(path);
    try {
      assert.equal(await count(reopened), acknowledged);
    } finally {
      await reopened.close();
    }
  } finally {
    tmpfs.unmount();
  }
});
