import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { NewEvent } from '../../src/store/index.ts';
import type { Recorded } from '../../src/core/events/index.ts';
import { until } from '../support/until.ts';
import { aliveSeen, declarationSent, ids, nodeName, reportReceived } from './eventStoreFixtures.ts';
import type { WithStore } from './eventStoreFixtures.ts';

// Subscriptions: catch-up then live with no gap, named checkpoints to resume from, type filters, and a
// handler that throws. Part of the conformance suite (eventStore.contract.ts).

export function subscriptionsContract(withStore: WithStore): void {
  void test(
    'a subscription catches up, then follows live, with no gap and no duplicate when appends land during catch-up',
    withStore(async (store) => {
      const n = nodeName();
      const s = `node-${n}`;
      const head = await store.headPosition();
      const expected: string[] = [];
      for (let i = 0; i < 30; i++) {
        const e = aliveSeen(n, i);
        expected.push(e.id);
        await store.append([{ stream: s, expected: 'any', events: [e] }]);
      }
      const seen: Recorded[] = [];
      let caughtUpAt = -1;
      let injected = false;
      const sub = store.subscribe({
        after: head,
        batchSize: 4,
        handler: async (events) => {
          seen.push(...events.filter((e) => e.stream === s));
          if (!injected) {
            // append while the subscription is still catching up
            injected = true;
            for (let i = 0; i < 5; i++) {
              const e = aliveSeen(n, 100 + i);
              expected.push(e.id);
              await store.append([{ stream: s, expected: 'any', events: [e] }]);
            }
          }
        },
        onCaughtUp: () => {
          caughtUpAt = seen.length;
        },
      });
      try {
        await until('catch-up', () => sub.isCaughtUp());
        assert.ok(caughtUpAt >= 30, 'caught up only after everything stored at start');
        for (let i = 0; i < 10; i++) {
          const e = aliveSeen(n, 200 + i);
          expected.push(e.id);
          await store.append([{ stream: s, expected: 'any', events: [e] }]);
        }
        await until('live events', () => seen.length >= expected.length);
        await new Promise((r) => setTimeout(r, 50));
        assert.deepEqual(ids(seen), expected);
        assert.equal(sub.position(), seen[seen.length - 1]!.position);
      } finally {
        await sub.stop();
      }
    }),
  );

  void test(
    'a subscription with a named checkpoint resumes after the last handled batch',
    withStore(async (store) => {
      const n = nodeName();
      const s = `node-${n}`;
      const cp = `contract-${n}`;
      assert.equal(await store.getCheckpoint(cp), null);
      const head = await store.headPosition();
      const first = [aliveSeen(n, 1), aliveSeen(n, 2), aliveSeen(n, 3)];
      await store.append([{ stream: s, expected: 'any', events: first }]);
      const seen1: Recorded[] = [];
      const sub1 = store.subscribe({
        after: head,
        checkpoint: cp,
        handler: (ev) => void seen1.push(...ev.filter((e) => e.stream === s)),
      });
      await until('first events', () => seen1.length === 3);
      await until('catch-up', () => sub1.isCaughtUp());
      await sub1.stop();
      const saved = await store.getCheckpoint(cp);
      assert.ok(saved !== null && saved >= seen1[2]!.position, 'checkpoint saved at or after the last handled event');

      const second = [aliveSeen(n, 4), aliveSeen(n, 5)];
      await store.append([{ stream: s, expected: 'any', events: second }]);
      const seen2: Recorded[] = [];
      // `after: head` is ignored because the checkpoint has a saved value
      const sub2 = store.subscribe({
        after: head,
        checkpoint: cp,
        handler: (ev) => void seen2.push(...ev.filter((e) => e.stream === s)),
      });
      try {
        await until('events after the checkpoint', () => seen2.length >= 2);
        await until('catch-up', () => sub2.isCaughtUp());
        assert.deepEqual(
          ids(seen2),
          second.map((e) => e.id),
        );
      } finally {
        await sub2.stop();
      }
    }),
  );

  void test(
    'setCheckpoint and getCheckpoint keep the latest position per name',
    withStore(async (store) => {
      const cp = `contract-${nodeName()}`;
      await store.setCheckpoint(cp, 5n);
      await store.setCheckpoint(cp, 9n);
      assert.equal(await store.getCheckpoint(cp), 9n);
      assert.equal(await store.getCheckpoint(`${cp}-other`), null);
    }),
  );

  void test(
    'a subscription with a type filter hands over only those types',
    withStore(async (store) => {
      const n = nodeName();
      const s = `node-${n}`;
      const head = await store.headPosition();
      const report = reportReceived(n, 2);
      await store.append([{ stream: s, expected: 'any', events: [declarationSent(n, 1), report, aliveSeen(n, 3)] }]);
      const seen: Recorded[] = [];
      const sub = store.subscribe({
        after: head,
        types: ['ReportReceived'],
        handler: (ev) => void seen.push(...ev.filter((e) => e.stream === s)),
      });
      try {
        await until('catch-up', () => sub.isCaughtUp() && seen.length >= 1);
        const last = aliveSeen(n, 9);
        const report2 = reportReceived(n, 10);
        await store.append([{ stream: s, expected: 'any', events: [last, report2] }]);
        await until('live report', () => seen.length >= 2);
        await new Promise((r) => setTimeout(r, 50));
        assert.deepEqual(ids(seen), [report.id, report2.id]);
        assert.ok(seen.every((e) => e.type === 'ReportReceived'));
      } finally {
        await sub.stop();
      }
    }),
  );

  void test(
    'a type-filtered subscription with a checkpoint resumes after the last event of those types it handled, through many others',
    withStore(async (store) => {
      const n = nodeName();
      const s = `node-${n}`;
      const cp = `contract-types-${n}`;
      const head = await store.headPosition();
      const first = declarationSent(n, 1);
      // Declarations are rare among reports and alives: the filter is what the relay relies on.
      const noise = (from: number): NewEvent[] =>
        Array.from({ length: 40 }, (_, i) => (i % 2 ? aliveSeen(n, from + i) : reportReceived(n, from + i)));
      await store.append([{ stream: s, expected: 'any', events: [...noise(0), first, ...noise(100)] }]);
      const seen1: Recorded[] = [];
      const sub1 = store.subscribe({
        after: head,
        checkpoint: cp,
        types: ['DeclarationSent'],
        batchSize: 7,
        handler: (ev) => void seen1.push(...ev),
      });
      await until('the first declaration', () => sub1.isCaughtUp() && seen1.some((e) => e.id === first.id));
      await sub1.stop();
      assert.ok(seen1.every((e) => e.type === 'DeclarationSent'));
      const saved = await store.getCheckpoint(cp);
      const firstAt = seen1.find((e) => e.id === first.id)!.position;
      assert.ok(saved !== null && saved >= firstAt, 'checkpoint at or after the declaration handled');

      const second = declarationSent(n, 2, ' second');
      await store.append([{ stream: s, expected: 'any', events: [...noise(200), second, ...noise(300)] }]);
      const seen2: Recorded[] = [];
      const sub2 = store.subscribe({
        after: head,
        checkpoint: cp,
        types: ['DeclarationSent'],
        handler: (ev) => void seen2.push(...ev.filter((e) => e.stream === s)),
      });
      try {
        await until('the second declaration', () => sub2.isCaughtUp() && seen2.length >= 1);
        await new Promise((r) => setTimeout(r, 50));
        assert.deepEqual(ids(seen2), [second.id], 'the declaration handled before the restart is not handed over again');
      } finally {
        await sub2.stop();
      }
    }),
  );

  void test(
    'a handler that throws gets the same batch again; nothing is skipped',
    withStore(async (store) => {
      const n = nodeName();
      const s = `node-${n}`;
      const head = await store.headPosition();
      const events = [aliveSeen(n, 1), aliveSeen(n, 2)];
      await store.append([{ stream: s, expected: 'any', events }]);
      const seen: Recorded[] = [];
      const errors: unknown[] = [];
      let failures = 2;
      const sub = store.subscribe({
        after: head,
        handler: (ev) => {
          const mine = ev.filter((e) => e.stream === s);
          if (mine.length > 0 && failures-- > 0) throw new Error('handler failed on purpose');
          seen.push(...mine);
        },
        onError: (err) => void errors.push(err),
      });
      try {
        await until('the batch after retries', () => seen.length >= 2);
        assert.deepEqual(
          ids(seen),
          events.map((e) => e.id),
        );
        assert.equal(errors.length, 2);
      } finally {
        await sub.stop();
      }
    }),
  );
}
