import assert from 'node:assert/strict';
import { test } from 'node:test';
import { readNodeColumns } from '../../src/store/index.ts';
import type { NewEvent } from '../../src/store/index.ts';
import { at, declarationSent, nodeName, reportReceived } from './eventStoreFixtures.ts';
import type { WithStore } from './eventStoreFixtures.ts';

// What the engine asks of a node's history directly: the latest send of a digest, the last-seen lease,
// and a report's sentEarlier. Part of the conformance suite (eventStore.contract.ts).

export function nodeQueriesContract(withStore: WithStore): void {
  void test(
    'findSend answers the latest send of a digest to a node, and null for a digest never sent to it',
    withStore(async (store) => {
      const n = nodeName();
      const other = nodeName();
      const sentTo = (node: string, serial: number, digest: string): NewEvent => {
        const e = declarationSent(node, serial, `${serial}`);
        return { ...e, data: { ...e.data, digest } } as NewEvent;
      };
      const [d1, d2, d3, theirs] = ['1', '2', '3', '4'].map((c) => c.repeat(64)) as [string, string, string, string];
      const named = (digest: string): NewEvent => {
        const r = reportReceived(n, 9);
        return { ...r, data: { ...r.data, declared: digest } } as NewEvent;
      };
      await store.append([
        { stream: `node-${n}`, expected: 'any', events: [sentTo(n, 1, d1), named(d1), sentTo(n, 2, d2), sentTo(n, 3, d1)] },
        { stream: `node-${other}`, expected: 'any', events: [sentTo(other, 1, theirs)] },
      ]);
      await store.append([{ stream: `node-${n}`, expected: 'any', events: [named(d3), named(theirs)] }]);
      assert.deepEqual(await store.findSend(n, d1), { serial: 3, sentAt: at(3) }, 'sent twice: the latest');
      assert.deepEqual(await store.findSend(n, d2), { serial: 2, sentAt: at(2) });
      assert.equal(await store.findSend(n, d3), null, 'named by a report only: never sent');
      assert.equal(await store.findSend(n, theirs), null, "another node's digest");
      assert.deepEqual(await store.findSend(other, theirs), { serial: 1, sentAt: at(1) });
      assert.equal(await store.findSend(nodeName(), d1), null, 'a node with no stream');
    }),
  );

  void test(
    'the last-seen lease: each node keeps its latest time (never moved back), each engine its last flush',
    withStore(async (store) => {
      const [a, b] = [nodeName(), nodeName()];
      await store.saveLastSeen('e1', 1_000, [
        [a, 500],
        [b, 700],
      ]);
      await store.saveLastSeen('e2', 2_000, [
        [a, 400],
        [b, 900],
      ]);
      await store.saveLastSeen('e1', 3_000, []);
      const lease = await store.loadLastSeen();
      assert.equal(lease.nodes.get(a), 500, 'an older time does not move it back');
      assert.equal(lease.nodes.get(b), 900);
      assert.equal(lease.flushes.get('e1'), 3_000);
      assert.equal(lease.flushes.get('e2'), 2_000);
    }),
  );

  void test(
    "a report's sentEarlier reads back intact, in readStream and in readColumns' serial column",
    withStore(async (store) => {
      const n = nodeName();
      const base = reportReceived(n, 4);
      const found = { ...base, data: { ...base.data, sentEarlier: { serial: 7, sentAt: at(1) } } } as NewEvent;
      const none = { ...reportReceived(n, 5), data: { ...reportReceived(n, 5).data, sentEarlier: null } } as NewEvent;
      await store.append([{ stream: `node-${n}`, expected: 'any', events: [found, none, reportReceived(n, 6)] }]);
      const read = await store.readStream(`node-${n}`);
      assert.deepEqual(
        read.map((e) => (e.type === 'ReportReceived' ? e.data.sentEarlier : 'other')),
        [{ serial: 7, sentAt: at(1) }, null, undefined],
      );
      const serials: number[] = [];
      for await (const c of readNodeColumns(store, { streamPrefix: `node-${n}` }))
        for (let i = 0; i < c.length; i++) serials.push(c.serial[i]!);
      assert.deepEqual(serials, [7, 0, 0]);
    }),
  );
}
