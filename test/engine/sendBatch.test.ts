import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createBatchSender } from '../../src/engine/sendBatch.ts';
import { foldNodeFromStore } from '../../src/engine/sendView.ts';
import { foldNodeEvents } from '../../projections/index.ts';
import { streamOf } from '../../src/core/events/index.ts';
import type { DeclarationSent, Recorded } from '../../src/core/events/index.ts';
import { readDeclaration, verifyDeclaration } from '../../src/core/declaration/index.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { isConvergeError } from '../../src/core/errors.ts';
import { historyInStore, testKey } from '../support/history.ts';

// Many nodes' declarations in one append call, each as the one-at-a-time sender
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

/**
 * `store` with `land` appended just before each of the next `times` appends that send a declaration
 * (after the sender read the streams, before its append reaches them), as a node reporting fast,
 * or another sender, would have it land.
 */
function landingBeforeEachSend(store: EventStore, times: number, land: (i: number) => Promise<unknown>): () => number {
  const append = store.append.bind(store);
  let landed = 0;
  let landing = false;
  store.append = async (writes) => {
    if (!landing && landed < times && writes.some((w) => w.events.some((e) => e.type === 'DeclarationSent'))) {
      landing = true;
      try {
        await land(landed++);
      } finally {
        landing = false;
      }
    }
    return append(writes);
  };
  return () => landed;
}

test('a node reporting fast during a bulk send does not make it fail: its reports and alives only moved the stream', async () => {
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  // Twelve moves in a row, more than the five lost races a send may have.
  // A second apart, as an alive's id is the node's and the time's.
  const landed = landingBeforeEachSend(store, 12, (i) => {
    h.tick(1_000);
    return i % 2 === 0 ? h.report('chatty', { carried: [] }) : h.alive('chatty');
  });
  const sender = createBatchSender({ store, key: testKey, now });
  const r = await sender.sendMany(['a', 'chatty', 'b'].map((node) => ({ node, resources: [{ id: 'web', ports: [9000] }] })));
  assert.equal(landed(), 12);
  assert.equal(r.appends, 13, 'each move caught up from the store and the call made again');
  assert.deepEqual(
    r.outcomes.map((o) => (o.ok ? [o.node, o.serial] : [o.node, o.code])),
    [
      ['a', 1],
      ['chatty', 1],
      ['b', 1],
    ],
  );
  const chatty = await store.readStream(streamOf('chatty'));
  assert.deepEqual(
    chatty.map((e) => e.type),
    [...Array.from({ length: 12 }, (_, i) => (i % 2 === 0 ? 'ReportReceived' : 'AliveSeen')), 'DeclarationSent'],
  );
});

test("a node's own events moving its stream are still bounded (maxMoves), and a port its newest report carries is refused", async () => {
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  landingBeforeEachSend(store, 12, () => {
    h.tick(1_000);
    return h.alive('chatty');
  });
  const bounded = createBatchSender({ store, key: testKey, now, maxMoves: 3 });
  await assert.rejects(
    bounded.sendMany([{ node: 'chatty', resources: [{ id: 'web' }] }]),
    (e) => isConvergeError(e, 'CONVERGE_ERR_WRONG_EXPECTED_REVISION') && /moved/.test(e.message),
  );
  assert.equal((await sends(store, 'chatty')).length, 0);

  const carrying = createMemoryEventStore();
  const c = historyInStore(carrying);
  landingBeforeEachSend(carrying, 6, (i) => c.report('chatty', { carried: i === 5 ? [9000] : [] }));
  const r = await createBatchSender({ store: carrying, key: testKey, now }).sendMany(
    ['a', 'chatty'].map((node) => ({ node, resources: [{ id: 'web', ports: [9000] }] })),
  );
  assert.deepEqual(
    r.outcomes.map((o) => (o.ok ? [o.node, o.serial] : [o.node, o.code])),
    [
      ['a', 1],
      ['chatty', 'CONVERGE_ERR_PORT_CARRIED'],
    ],
  );
});

test('another send landing between view and append is a lost race: the bulk send gives up after 5', async () => {
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  // Each another rollout's send, so its id (rollout and node) is not the one this batch's send has.
  const landed = landingBeforeEachSend(store, 12, (i) => h.send('contested', undefined, { id: `other-${i}`, wave: 1 }));
  const sender = createBatchSender({ store, key: testKey, now });
  await assert.rejects(sender.sendMany(['a', 'contested'].map((node) => ({ node, resources: [{ id: 'web' }] }))), (e) =>
    isConvergeError(e, 'CONVERGE_ERR_WRONG_EXPECTED_REVISION'),
  );
  assert.equal(landed(), 5, 'five appends, each lost to another send');
  assert.equal((await sends(store, 'a')).length, 0, 'nothing of the batch was written');
});

test('another send that took the same serial first is a lost race too: the node is sent the next serial, not answered with that send', async () => {
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  // Serial 1 of the node, stored first: the same id as this batch's send to it (node and serial), so
  // the store takes the batch's as a retry of it and writes nothing for the node.
  let other: { digest: string; serial: number } | undefined;
  landingBeforeEachSend(store, 1, async () => (other = await h.send('contested', [{ id: 'db' }])));
  const sender = createBatchSender({ store, key: testKey, now });
  const r = await sender.sendMany(['a', 'contested'].map((node) => ({ node, resources: [{ id: 'web' }] })));
  assert.equal(other?.serial, 1);
  const [a, contested] = r.outcomes;
  assert.ok(a?.ok && a.serial === 1);
  assert.ok(contested?.ok, JSON.stringify(contested));
  assert.equal(contested.serial, 2, 'the next serial, as the one-at-a-time sender takes after a lost race');
  assert.notEqual(contested.digest, other?.digest, "not the other send's answer");
  const stored = await sends(store, 'contested');
  assert.deepEqual(
    stored.map((e) => [e.data.serial, e.data.digest]),
    [
      [1, other?.digest],
      [2, contested.digest],
    ],
  );
  assert.equal((await sends(store, 'a')).length, 1, 'a was sent once');
  assert.equal(r.appends, 2);
});

test('a node losing its serial to other sends 5 times after the rest of the batch was recorded is refused on its own', async () => {
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  // Each time the serial this batch is about to take: the history counts the node's serials as the batch does.
  const landed = landingBeforeEachSend(store, 12, () => h.send('contested', [{ id: 'db' }]));
  const sender = createBatchSender({ store, key: testKey, now });
  const r = await sender.sendMany(['a', 'contested'].map((node) => ({ node, resources: [{ id: 'web' }] })));
  assert.equal(landed(), 5);
  assert.equal(r.appends, 5);
  const [a, contested] = r.outcomes;
  assert.ok(a?.ok && a.serial === 1, 'the node sent in the first call keeps its answer');
  assert.ok(contested !== undefined && !contested.ok);
  assert.equal(contested.code, 'CONVERGE_ERR_WRONG_EXPECTED_REVISION');
  assert.match(contested.message, /other sends took the serial 5 times/);
  assert.equal((await sends(store, 'a')).length, 1);
  assert.equal((await sends(store, 'contested')).length, 5, "only the other sends' declarations");
  assert.notEqual(r.position, null);
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

test('a large batch is built and signed over several turns of the event loop, and still appended in one call', async () => {
  const { store, appends } = counting(createMemoryEventStore());
  // Turns the event loop took while the batch was being built, up to its append.
  let turns = 0;
  let building = true;
  const tick = (): void => {
    if (!building) return;
    turns++;
    setImmediate(tick);
  };
  const append = store.append.bind(store);
  let written = 0;
  store.append = async (writes) => {
    building = false;
    written += writes.length;
    return append(writes);
  };
  const sender = createBatchSender({
    store,
    key: testKey,
    now,
    loadNode: async () => ({ revision: -1n, carried: [], sent: null }),
    // A slice of 0 ms: a turn before every declaration, so the count below does not hang on the machine's speed.
    signSliceMs: 0,
  });
  const items = Array.from({ length: 500 }, (_, i) => ({ node: `n-${String(i).padStart(3, '0')}`, resources: [{ id: 'web' }] }));
  setImmediate(tick);
  const r = await sender.sendMany(items);
  assert.equal(r.outcomes.filter((o) => o.ok).length, 500);
  // Signing 500 declarations in one turn held the loop from the API, ingest and the projections
  // for all of it (tens of ms on a quiet machine, far more on a busy one).
  assert.ok(turns >= 500, `the loop took ${turns} turn(s) while 500 declarations were signed`);
  // Sliced or not, the batch is one append call: all of it or none of it.
  assert.equal(appends(), 1);
  assert.equal(written, 500);
});
