import assert from 'node:assert/strict';
import { test } from 'node:test';
import { aliveSeen, declarationSent, ids, nodeName, rejectsWith, reportReceived, stripe } from './eventStoreFixtures.ts';
import type { StoreHarness } from './eventStoreFixtures.ts';

// A closed store: calls fail, and storage reopened keeps every event and checkpoint. Part of the
// conformance suite (eventStore.contract.ts).

export function closeReopenContract(harness: StoreHarness): void {
  void test('after close, calls fail with STORE_CLOSED', async () => {
    const store = await harness.create();
    await store.close();
    const n = nodeName();
    await rejectsWith(store.append([{ stream: `node-${n}`, expected: 'any', events: [aliveSeen(n)] }]), 'CONVERGE_ERR_STORE_CLOSED');
    await rejectsWith(store.readStream(`node-${n}`), 'CONVERGE_ERR_STORE_CLOSED');
  });

  const reopen = harness.reopen;
  void test(
    'reopening after close keeps every event and checkpoint, and never reuses a position',
    { skip: reopen === undefined ? (harness.reopenSkip ?? 'this adapter cannot reopen') : false },
    async () => {
      assert.ok(reopen !== undefined);
      const n = nodeName();
      const s = `node-${n}`;
      const cp = `contract-${n}`;
      const store = await harness.create();
      const events = [declarationSent(n, 1), reportReceived(n, 2)];
      const r = await store.append([{ stream: s, expected: 'no_stream', events }]);
      await store.setCheckpoint(cp, r.position!);
      await store.close();
      const again = await reopen(store);
      try {
        const read = await again.readStream(s);
        assert.deepEqual(
          ids(read),
          events.map((e) => e.id),
        );
        assert.deepEqual(
          read.map((e) => ({ type: e.type, data: e.data })),
          events.map(stripe),
        );
        assert.equal(await again.getCheckpoint(cp), r.position);
        const next = await again.append([{ stream: s, expected: 1n, events: [aliveSeen(n, 3)] }]);
        assert.ok(next.position! > r.position!, 'positions keep growing after reopen');
      } finally {
        await again.close();
      }
    },
  );
}
