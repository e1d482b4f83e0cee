import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createBatchSender } from '../../src/engine/sendBatch.ts';
import { foldNodeFromStore } from '../../src/engine/send.ts';
import { foldNodeEvents } from '../../projections/index.ts';
import { streamOf } from '../../src/events/index.ts';
import type { DeclarationSent, Recorded } from '../../src/events/index.ts';
import { readDeclaration, verifyDeclaration } from '../../src/declaration/index.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { historyInStore, testKey } from '../support/history.ts';

// Issue 14 §6: many nodes' declarations in one append call, each as the one-at-a-time sender
// would have made it (serial + 1, signed bytes), and each node's answer of its own.

const now = () => new Date('2026-11-30T14:00:00Z');
const sends = async (store: EventStore, node: string): Promise<Recorded<DeclarationSent>[]> =>
  (await store.readStream(streamOf(node))).filter((e): e is Recorded<DeclarationSent> => e.type === 'DeclarationSent');

function counting(store: EventStore): { store: EventStore; appends: () => number } {
  let n = 0;
  const append = store.append.bind(store);
  store.append = async (writes) => {
    n++;
    return append(writes);
  };
  return { store, appends: () => n };
}

test('one append call records every node, each with its next serial and signed bytes', async () => {
  const { store, appends } = counting(createMemoryEventStore());
  const h = historyInStore(store);
  await h.send('a');
  await h.send('a');
  await h.report('b', { carried: [22] });
  const before = appends();
  const sender = createBatchSender({ store, key: testKey, now });
  const r = await sender.sendMany([
    { node: 'a', resources: [{ id: 'web', image: 'x' }] },
    { node: 'b', resources: [{ id: 'web', image: 'y' }] },
    { node: 'c', resources: [{ id: 'db' }] },
  ]);
  assert.equal(appends() - before, 1);
  assert.equal(r.appends, 1);
  assert.deepEqual(
    r.outcomes.map((o) => (o.ok ? [o.node, o.serial] : [o.node, o.code])),
    [
      ['a', 3],
      ['b', 1],
      ['c', 1],
    ],
  );
  for (const o of r.outcomes) {
    assert.ok(o.ok);
    const [e] = (await sends(store, o.node)).slice(-1);
    assert.equal(e?.data.digest, o.digest);
    const bytes = Buffer.from(e!.data.declaration, 'base64');
    assert.ok(verifyDeclaration(bytes, Buffer.from(e!.data.signature, 'base64'), testKey));
    assert.equal(readDeclaration(bytes).serial, o.serial);
  }
});

test('a bad item is its own answer; the rest of the batch is sent', async () => {
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  await h.report('carrier', { carried: [8080] });
  const sender = createBatchSender({ store, key: testKey, now });
  const r = await sender.sendMany([
    { node: 'ok-1', resources: [{ id: 'web', ports: [8080] }] },
    { node: 'Bad Node', resources: [{ id: 'web' }] },
    { node: 'carrier', resources: [{ id: 'web', ports: [8080] }] },
    { node: 'ok-2', resources: [{ id: 'a' }, { id: 'a' }] },
    { node: 'ok-1', resources: [{ id: 'web' }] },
  ]);
  assert.deepEqual(
    r.outcomes.map((o) => (o.ok ? 'ok' : o.code)),
    ['ok', 'CONVERGE_ERR_NODE_ID_INVALID', 'CONVERGE_ERR_PORT_CARRIED', 'CONVERGE_ERR_SPEC_DUPLICATE_ID', 'CONVERGE_ERR_BAD_REQUEST'],
  );
  assert.equal((await sends(store, 'ok-1')).length, 1);
  assert.equal((await sends(store, 'carrier')).length, 0);
});

test('a node stream that moved after the view (a lagging read model) is caught up from the store and the call made again', async () => {
  const { store, appends } = counting(createMemoryEventStore());
  const h = historyInStore(store);
  for (const n of ['a', 'b', 'c']) await h.send(n);
  // The view is taken now; then a report and another send land before the batch's append.
  const stale = new Map<string, Awaited<ReturnType<ReturnType<typeof foldNodeFromStore>>>>();
  for (const n of ['a', 'b', 'c']) stale.set(n, await foldNodeFromStore(store)(n));
  await h.report('a', { carried: [9000] });
  await h.send('c');
  const before = appends();
  const sender = createBatchSender({ store, key: testKey, now, loadNode: async (n) => stale.get(n)! });
  const r = await sender.sendMany(['a', 'b', 'c'].map((node) => ({ node, resources: [{ id: 'web', ports: [9000] }] })));
  assert.equal(r.appends, 2, 'one conflict, one retry with every node caught up');
  assert.equal(appends() - before, 2);
  assert.deepEqual(
    r.outcomes.map((o) => (o.ok ? [o.node, o.serial] : [o.node, o.code])),
    [
      ['a', 'CONVERGE_ERR_PORT_CARRIED'],
      ['b', 2],
      ['c', 3],
    ],
  );
  const c = foldNodeEvents('c', await store.readStream(streamOf('c')));
  assert.equal(c.sent?.serial, 3);
});

test("a rollout's send retried from a stale view keeps the first: one declaration per node from one rollout", async () => {
  const store = createMemoryEventStore();
  const sender = createBatchSender({ store, key: testKey, now, loadNode: async () => ({ revision: -1n, carried: [], sent: null }) });
  const items = ['a', 'b'].map((node) => ({ node, resources: [{ id: 'web' }] }));
  const first = await sender.sendMany(items, { rollout: { id: 'r1', wave: 1 } });
  const again = await sender.sendMany(items, { rollout: { id: 'r1', wave: 1 } });
  assert.deepEqual(again.outcomes, first.outcomes, 'the retry answers with what was stored');
  assert.equal(again.position, null, 'nothing new was written');
  for (const n of ['a', 'b']) {
    const s = await sends(store, n);
    assert.equal(s.length, 1);
    assert.deepEqual(s[0]?.data.rollout, { id: 'r1', wave: 1 });
  }
});

test('extra writes go into the same call; a conflict on one of them is thrown, not retried', async () => {
  const store = createMemoryEventStore();
  const sender = createBatchSender({ store, key: testKey, now });
  const h = historyInStore(store);
  await h.send('other');
  await assert.rejects(
    sender.sendMany([{ node: 'a', resources: [{ id: 'web' }] }], {
      extra: () => [{ stream: streamOf('other'), expected: 'no_stream', events: [] }],
    }),
    /append to node-other: expected no_stream/,
  );
  assert.equal((await sends(store, 'a')).length, 0, 'nothing of the call was written');
});
