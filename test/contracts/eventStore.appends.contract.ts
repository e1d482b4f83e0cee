import assert from 'node:assert/strict';
import { test } from 'node:test';
import { aliveSeen, collectAll, declarationSent, ids, nodeName, rejectsWith } from './eventStoreFixtures.ts';
import type { StoreHarness, WithStore } from './eventStoreFixtures.ts';

// What an append refuses or ignores: a retry with the same ids, an id stored elsewhere, a batch over
// many streams where one conflicts, an event over the size limit. Part of the conformance suite
// (eventStore.contract.ts).

export function appendsContract(harness: StoreHarness, withStore: WithStore): void {
  void test(
    'retrying an append with the same event ids is a no-op, even after the stream moved on',
    withStore(async (store) => {
      const n = nodeName();
      const s = `node-${n}`;
      const first = [aliveSeen(n, 1), aliveSeen(n, 2)];
      const a = await store.append([{ stream: s, expected: 'no_stream', events: first }]);
      const retry = await store.append([{ stream: s, expected: 'no_stream', events: first }]);
      assert.deepEqual(retry.streams, [{ stream: s, nextExpected: 1n, written: 0 }]);
      assert.equal(retry.position, null);
      await store.append([{ stream: s, expected: 1n, events: [aliveSeen(n, 3)] }]);
      const late = await store.append([{ stream: s, expected: 'no_stream', events: first }]);
      assert.equal(late.streams[0]!.written, 0);
      const read = await store.readStream(s);
      assert.equal(read.length, 3);
      assert.equal(new Set(ids(read)).size, 3);
      assert.equal(read[1]!.position, a.position);
    }),
  );

  void test(
    'an event id stored in another stream is refused as a duplicate, and nothing is written',
    { skip: harness.crossStreamDuplicateIdSkip ?? false },
    withStore(async (store) => {
      const n = nodeName();
      const e = aliveSeen(n, 1);
      await store.append([{ stream: `node-${n}`, expected: 'any', events: [e] }]);
      const other = `node-${n}-other`;
      await rejectsWith(
        store.append([{ stream: other, expected: 'any', events: [aliveSeen(n, 2), e] }]),
        'CONVERGE_ERR_DUPLICATE_EVENT_ID',
      );
      assert.deepEqual(await store.readStream(other), []);
    }),
  );

  void test(
    'one event id twice in the same call is refused before anything is written',
    withStore(async (store) => {
      const n = nodeName();
      const e = aliveSeen(n, 1);
      await rejectsWith(store.append([{ stream: `node-${n}`, expected: 'any', events: [e, e] }]), 'CONVERGE_ERR_DUPLICATE_EVENT_ID');
      assert.deepEqual(await store.readStream(`node-${n}`), []);
    }),
  );

  void test(
    'one call appends to many streams and reports each stream in order',
    withStore(async (store) => {
      const [a, b, c] = [nodeName(), nodeName(), nodeName()];
      await store.append([{ stream: `node-${b}`, expected: 'no_stream', events: [aliveSeen(b, 0)] }]);
      const r = await store.append([
        { stream: `node-${a}`, expected: 'no_stream', events: [aliveSeen(a, 1), aliveSeen(a, 2)] },
        { stream: `node-${b}`, expected: 0n, events: [aliveSeen(b, 1)] },
        { stream: `node-${c}`, expected: 'any', events: [] },
      ]);
      assert.deepEqual(r.streams, [
        { stream: `node-${a}`, nextExpected: 1n, written: 2 },
        { stream: `node-${b}`, nextExpected: 1n, written: 1 },
        { stream: `node-${c}`, nextExpected: -1n, written: 0 },
      ]);
      const last = [...(await store.readStream(`node-${a}`)), ...(await store.readStream(`node-${b}`))].reduce(
        (m, e) => (e.position > m ? e.position : m),
        0n,
      );
      assert.equal(r.position, last);
    }),
  );

  void test(
    'two writes to the same stream in one call apply in order',
    withStore(async (store) => {
      const n = nodeName();
      const s = `node-${n}`;
      const [e1, e2] = [aliveSeen(n, 1), aliveSeen(n, 2)];
      const r = await store.append([
        { stream: s, expected: 'no_stream', events: [e1] },
        { stream: s, expected: 0n, events: [e2] },
      ]);
      assert.deepEqual(
        r.streams.map((x) => x.nextExpected),
        [0n, 1n],
      );
      assert.deepEqual(ids(await store.readStream(s)), [e1.id, e2.id]);
    }),
  );

  void test(
    'a many-stream append where one stream conflicts writes nothing of the batch',
    { skip: harness.crossStreamAtomicitySkip ?? false },
    withStore(async (store) => {
      const [a, b, c] = [nodeName(), nodeName(), nodeName()];
      await store.append([{ stream: `node-${b}`, expected: 'no_stream', events: [aliveSeen(b, 0)] }]);
      const head = await store.headPosition();
      await rejectsWith(
        store.append([
          { stream: `node-${a}`, expected: 'no_stream', events: [aliveSeen(a, 1)] },
          { stream: `node-${b}`, expected: 'no_stream', events: [aliveSeen(b, 1)] },
          { stream: `node-${c}`, expected: 'any', events: [aliveSeen(c, 1)] },
        ]),
        'CONVERGE_ERR_WRONG_EXPECTED_REVISION',
      );
      assert.deepEqual(await store.readStream(`node-${a}`), []);
      assert.equal((await store.readStream(`node-${b}`)).length, 1);
      assert.deepEqual(await store.readStream(`node-${c}`), []);
      const after = await collectAll(store, { after: head });
      assert.deepEqual(
        after.filter((e) => [a, b, c].some((x) => e.stream === `node-${x}`)),
        [],
      );
    }),
  );

  void test(
    'an event over the size limit is refused with EVENT_TOO_LARGE and nothing of the call is written',
    withStore(async (store) => {
      const [a, b] = [nodeName(), nodeName()];
      const huge = declarationSent(b, 1, ' '.repeat(harness.maxEventBytes + 1));
      const err = await rejectsWith(
        store.append([
          { stream: `node-${a}`, expected: 'any', events: [aliveSeen(a, 1)] },
          { stream: `node-${b}`, expected: 'any', events: [huge] },
        ]),
        'CONVERGE_ERR_EVENT_TOO_LARGE',
      );
      assert.match(err.message, /limit/);
      assert.deepEqual(await store.readStream(`node-${a}`), []);
      assert.deepEqual(await store.readStream(`node-${b}`), []);
    }),
  );
}
