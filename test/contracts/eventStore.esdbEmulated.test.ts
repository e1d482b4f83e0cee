import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { isConvergeError } from '../../src/core/errors.ts';
import type { Recorded } from '../../src/core/events/index.ts';
import { createEsdbEventStore } from '../../src/store/esdb/esdbEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { aliveSeen, eventStoreContract } from './eventStore.contract.ts';
import { createFakeEsdb } from './fakeEsdbClient.ts';
import type { FakeEsdb } from './fakeEsdbClient.ts';
import { until } from '../support/until.ts';

// The EventStoreDB adapter's own logic (revision pinning, idempotent retries, error mapping,
// checkpoint stream, subscribeToAll handling, resubscribe, positions) over an EMULATED client:
// test/contracts/fakeEsdbClient.ts. This is not a run against EventStoreDB; that is
// eventStore.esdb.test.ts with EVENTSTORE_URL.

const maxEventBytes = 64 * 1024;
const fakes = new WeakMap<EventStore, FakeEsdb>();
const open = (fake: FakeEsdb): EventStore => {
  const store = createEsdbEventStore('esdb://emulated:2113?tls=false', {
    maxEventBytes,
    client: fake.client,
    minBackoffMs: 5,
    maxBackoffMs: 50,
  });
  fakes.set(store, fake);
  return store;
};

eventStoreContract('esdb adapter over an emulated client (not a real EventStoreDB server)', {
  create: async () => open(createFakeEsdb()),
  // The emulated server outlives the store's client, as a real server would.
  reopen: async (closed) => open(fakes.get(closed)!),
  maxEventBytes,
  crossStreamAtomicitySkip: 'EventStoreDB has no cross-stream transaction: a many-stream append is atomic per stream (docs/store.md)',
  crossStreamDuplicateIdSkip:
    'EventStoreDB checks event ids per stream only; an id reused in another stream is not detected (docs/store.md)',
});

void describe('esdb adapter over an emulated client (not a real EventStoreDB server): connection faults', () => {
  void test('a dropped subscription resubscribes from the last handled position: no gap, no duplicate', async () => {
    const fake = createFakeEsdb();
    const store = open(fake);
    const s = 'node-drop';
    const expected: string[] = [];
    const add = async (n: number, from: number): Promise<void> => {
      for (let i = 0; i < n; i++) {
        const e = aliveSeen('drop', from + i);
        expected.push(e.id);
        await store.append([{ stream: s, expected: 'any', events: [e] }]);
      }
    };
    await add(10, 0);
    const seen: Recorded[] = [];
    const errors: unknown[] = [];
    let drops = 0;
    const sub = store.subscribe({
      batchSize: 3,
      handler: (ev) => {
        seen.push(...ev);
        // drop mid catch-up, with events still buffered in the client
        if (drops === 0 && seen.length >= 4) {
          drops++;
          fake.dropSubscriptions();
        }
      },
      onError: (err) => void errors.push(err),
    });
    try {
      await until('catch-up after a drop', () => sub.isCaughtUp() && seen.length >= 10);
      await add(5, 100);
      await until('live events', () => seen.length >= 15);
      fake.dropSubscriptions();
      await add(5, 200);
      await until('live events after a second drop', () => seen.length >= 20);
      await new Promise((r) => setTimeout(r, 30));
      assert.deepEqual(
        seen.map((e) => e.id),
        expected,
      );
      assert.ok(fake.subscribeCalls() >= 3, 'resubscribed after each drop');
      assert.ok(errors.length >= 2 && errors.every((e) => isConvergeError(e, 'CONVERGE_ERR_STORE_UNAVAILABLE')), String(errors));
      assert.equal(sub.position(), seen[seen.length - 1]!.position);
    } finally {
      await sub.stop();
      await store.close();
    }
  });

  void test('an unavailable server is CONVERGE_ERR_STORE_UNAVAILABLE; calls work again once it is back', async () => {
    const fake = createFakeEsdb();
    const store = open(fake);
    const s = 'node-down';
    await store.append([{ stream: s, expected: 'no_stream', events: [aliveSeen('down', 0)] }]);
    fake.setUnavailable(true);
    const rejects = async (p: Promise<unknown>, what: string): Promise<void> => {
      await assert.rejects(p, (err) => isConvergeError(err, 'CONVERGE_ERR_STORE_UNAVAILABLE'), what);
    };
    await rejects(store.append([{ stream: s, expected: 0n, events: [aliveSeen('down', 1)] }]), 'append');
    await rejects(store.readStream(s), 'readStream');
    await rejects(
      (async () => {
        for await (const b of store.readAll()) void b;
      })(),
      'readAll',
    );
    await rejects(store.headPosition(), 'headPosition');
    await rejects(store.setCheckpoint('down', 1n), 'setCheckpoint');
    await rejects(store.getCheckpoint('down'), 'getCheckpoint');

    const errors: unknown[] = [];
    const seen: Recorded[] = [];
    const sub = store.subscribe({ handler: (ev) => void seen.push(...ev), onError: (err) => void errors.push(err) });
    try {
      await until('subscription retries while down', () => errors.length >= 2);
      assert.ok(
        errors.every((e) => isConvergeError(e, 'CONVERGE_ERR_STORE_UNAVAILABLE')),
        String(errors),
      );
      fake.setUnavailable(false);
      const r = await store.append([{ stream: s, expected: 0n, events: [aliveSeen('down', 2)] }]);
      assert.equal(r.streams[0]!.nextExpected, 1n);
      await until('subscription recovers', () => seen.length >= 2);
      assert.deepEqual(
        seen.map((e) => e.revision),
        [0n, 1n],
      );
    } finally {
      await sub.stop();
      await store.close();
    }
  });
});
