import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isConvergeError } from '../../src/core/errors.ts';
import type { Recorded } from '../../src/core/events/index.ts';
import { aliveSeen, declarationSent, ids, nodeName, rejectsWith, reportReceived, stripe } from './eventStoreFixtures.ts';
import type { WithStore } from './eventStoreFixtures.ts';

// Reading one stream, forwards and backwards, and the expected revision an append is checked against,
// one writer or many at once. Part of the conformance suite (eventStore.contract.ts).

export function streamsContract(withStore: WithStore): void {
  void test(
    'reading a stream that was never written returns no events, forwards and backwards',
    withStore(async (store) => {
      const s = `node-${nodeName()}`;
      assert.deepEqual(await store.readStream(s), []);
      assert.deepEqual(await store.readStream(s, { direction: 'backwards' }), []);
      assert.deepEqual(await store.readStream(s, { fromRevision: 5n, limit: 3 }), []);
    }),
  );

  void test(
    'appended events read back in order with revisions from 0, increasing positions, and their data intact',
    withStore(async (store) => {
      const n = nodeName();
      const s = `node-${n}`;
      const events = [declarationSent(n, 1), reportReceived(n, 2), aliveSeen(n, 3)];
      const r = await store.append([{ stream: s, expected: 'no_stream', events }]);
      assert.deepEqual(r.streams, [{ stream: s, nextExpected: 2n, written: 3 }]);
      const read = await store.readStream(s);
      assert.deepEqual(ids(read), ids(events as Recorded[]));
      assert.deepEqual(
        read.map((e) => e.revision),
        [0n, 1n, 2n],
      );
      assert.deepEqual(
        read.map((e) => ({ type: e.type, data: e.data })),
        events.map(stripe),
      );
      assert.ok(read.every((e) => e.stream === s));
      assert.ok(read[0]!.position < read[1]!.position && read[1]!.position < read[2]!.position);
      assert.equal(r.position, read[2]!.position);
    }),
  );

  void test(
    'a stream reads backwards from the end or from a revision, and forwards from a revision, within a limit',
    withStore(async (store) => {
      const n = nodeName();
      const s = `node-${n}`;
      const events = Array.from({ length: 6 }, (_, i) => aliveSeen(n, i));
      await store.append([{ stream: s, expected: 'no_stream', events }]);
      const back = await store.readStream(s, { direction: 'backwards', limit: 2 });
      assert.deepEqual(
        back.map((e) => e.revision),
        [5n, 4n],
      );
      const backFrom = await store.readStream(s, { direction: 'backwards', fromRevision: 3n });
      assert.deepEqual(
        backFrom.map((e) => e.revision),
        [3n, 2n, 1n, 0n],
      );
      const fwd = await store.readStream(s, { fromRevision: 2n, limit: 3 });
      assert.deepEqual(
        fwd.map((e) => e.revision),
        [2n, 3n, 4n],
      );
    }),
  );

  void test(
    'no_stream is refused once the stream exists, and nothing is written',
    withStore(async (store) => {
      const n = nodeName();
      const s = `node-${n}`;
      await store.append([{ stream: s, expected: 'no_stream', events: [aliveSeen(n, 1)] }]);
      await rejectsWith(
        store.append([{ stream: s, expected: 'no_stream', events: [aliveSeen(n, 2)] }]),
        'CONVERGE_ERR_WRONG_EXPECTED_REVISION',
      );
      assert.equal((await store.readStream(s)).length, 1);
    }),
  );

  void test(
    'stream_exists is refused for a stream that has no events, and nothing is written',
    withStore(async (store) => {
      const n = nodeName();
      const s = `node-${n}`;
      await rejectsWith(
        store.append([{ stream: s, expected: 'stream_exists', events: [aliveSeen(n, 1)] }]),
        'CONVERGE_ERR_WRONG_EXPECTED_REVISION',
      );
      assert.deepEqual(await store.readStream(s), []);
      await store.append([{ stream: s, expected: 'no_stream', events: [aliveSeen(n, 2)] }]);
      const r = await store.append([{ stream: s, expected: 'stream_exists', events: [aliveSeen(n, 3)] }]);
      assert.equal(r.streams[0]!.nextExpected, 1n);
    }),
  );

  void test(
    'an exact revision is refused when the stream is behind or ahead of it, and accepted when it matches',
    withStore(async (store) => {
      const n = nodeName();
      const s = `node-${n}`;
      await rejectsWith(store.append([{ stream: s, expected: 0n, events: [aliveSeen(n, 0)] }]), 'CONVERGE_ERR_WRONG_EXPECTED_REVISION');
      await store.append([{ stream: s, expected: 'no_stream', events: [aliveSeen(n, 1), aliveSeen(n, 2)] }]);
      await rejectsWith(store.append([{ stream: s, expected: 0n, events: [aliveSeen(n, 3)] }]), 'CONVERGE_ERR_WRONG_EXPECTED_REVISION');
      await rejectsWith(store.append([{ stream: s, expected: 2n, events: [aliveSeen(n, 3)] }]), 'CONVERGE_ERR_WRONG_EXPECTED_REVISION');
      const r = await store.append([{ stream: s, expected: 1n, events: [aliveSeen(n, 3)] }]);
      assert.deepEqual(r.streams, [{ stream: s, nextExpected: 2n, written: 1 }]);
      assert.equal((await store.readStream(s)).length, 3);
    }),
  );

  void test(
    'any appends whatever the stream holds',
    withStore(async (store) => {
      const n = nodeName();
      const s = `node-${n}`;
      await store.append([{ stream: s, expected: 'any', events: [aliveSeen(n, 1)] }]);
      await store.append([{ stream: s, expected: 'any', events: [aliveSeen(n, 2)] }]);
      assert.deepEqual(
        (await store.readStream(s)).map((e) => e.revision),
        [0n, 1n],
      );
    }),
  );

  void test(
    'concurrent appends to one stream with the same expected revision: exactly one wins',
    withStore(async (store) => {
      const n = nodeName();
      const s = `node-${n}`;
      await store.append([{ stream: s, expected: 'no_stream', events: [aliveSeen(n, 0)] }]);
      const racers = Array.from({ length: 8 }, (_, i) => [aliveSeen(n, 10 + i), aliveSeen(n, 20 + i)]);
      const results = await Promise.allSettled(racers.map((events) => store.append([{ stream: s, expected: 0n, events }])));
      const won = results.flatMap((r, i) => (r.status === 'fulfilled' ? [i] : []));
      assert.equal(won.length, 1, 'exactly one racer wins');
      for (const r of results)
        if (r.status === 'rejected') assert.ok(isConvergeError(r.reason, 'CONVERGE_ERR_WRONG_EXPECTED_REVISION'), String(r.reason));
      const read = await store.readStream(s);
      assert.deepEqual(
        ids(read).slice(1),
        racers[won[0]!]!.map((e) => e.id),
      );
    }),
  );
}
