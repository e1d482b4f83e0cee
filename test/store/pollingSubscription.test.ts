import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Recorded } from '../../src/core/events/index.ts';
import { createNotifier } from '../../src/store/notifier.ts';
import { createPollingSubscription, minTurnBatch, nextBatchLimit } from '../../src/store/pollingSubscription.ts';
import type { PollingSource } from '../../src/store/pollingSubscription.ts';
import { until } from '../support/until.ts';
import { countLoopTurns } from '../support/loopTurns.ts';

// A subscription's batch is read and handled in one turn of the event loop, which holds every
// request as long: once a batch's synchronous work runs longer than a slice (src/turnBudget.ts),
// the next reads ask for fewer events, and no event is skipped or handed over twice for it.

/** A log of `n` events (only positions matter here), and the limits its reads were asked for. */
function source(n: number, clock: { t: number }, readMsPerEvent: number): { source: PollingSource; limits: number[] } {
  const events = Array.from({ length: n }, (_, i) => ({ position: BigInt(i + 1) }) as unknown as Recorded);
  const limits: number[] = [];
  return {
    limits,
    source: {
      readAfter: async (after, limit) => {
        limits.push(limit);
        const from = after === null ? 0 : Number(after);
        const batch = events.slice(from, from + limit);
        clock.t += batch.length * readMsPerEvent;
        return batch;
      },
      headPosition: async () => BigInt(n),
      getCheckpoint: async () => null,
      setCheckpoint: async () => {},
      notifier: createNotifier(),
      pollMs: 1_000,
    },
  };
}

async function follow(n: number, msPerEvent: number, options: Readonly<{ checkpoint?: string }> = {}) {
  const clock = { t: 0 };
  const { source: s, limits } = source(n, clock, msPerEvent / 2);
  const seen: bigint[] = [];
  const sub = createPollingSubscription(
    s,
    {
      batchSize: 500,
      ...options,
      handler: (events) => {
        clock.t += (events.length * msPerEvent) / 2;
        for (const e of events) seen.push(e.position);
      },
    },
    () => clock.t,
  );
  await until('every event handled', () => seen.length >= n);
  await sub.stop();
  return { seen, limits };
}

test('batches that run long are read smaller, every event still handled once, in order', async () => {
  // 0.05 ms an event: 500 take 25 ms, a slice of 2 ms holds 40.
  const { seen, limits } = await follow(5_000, 0.05);
  assert.deepEqual(
    seen,
    Array.from({ length: 5_000 }, (_, i) => BigInt(i + 1)),
  );
  assert.equal(limits[0], 500, 'the first read asks for the whole batch size');
  assert.equal(limits[1], 40, 'after a batch of 25 ms, what fits 2 ms');
  assert.ok(limits.slice(1).every((l) => l === 40));
});

test('cheap batches keep the batch size; a checkpointed subscription keeps it whatever they cost', async () => {
  assert.ok((await follow(3_000, 0)).limits.every((l) => l === 500));
  assert.ok((await follow(3_000, 0.05, { checkpoint: 'relay' })).limits.every((l) => l === 500));
});

test('the limit never falls below a floor, and grows back at most twice a batch', () => {
  assert.equal(nextBatchLimit(500, 500, 500, 10_000), minTurnBatch);
  assert.equal(nextBatchLimit(40, 500, 40, 0.1), 80);
  assert.equal(nextBatchLimit(400, 500, 400, 0), 500);
  assert.equal(nextBatchLimit(8, 8, 8, 10_000), 8, 'never above the batch size asked for');
});

test('subscriptions catching up together take turns of the loop: one batch a turn, not one each', async () => {
  const turns = countLoopTurns();
  const handled: { sub: number; turn: number }[] = [];
  const subs = [0, 1, 2].map((i) => {
    const { source: s } = source(40, { t: 0 }, 0);
    return createPollingSubscription(s, {
      batchSize: 10,
      handler: () => {
        handled.push({ sub: i, turn: turns.now() });
      },
    });
  });
  await until('every batch handled', () => handled.length >= 12);
  await turns.stop();
  await Promise.all(subs.map((sub) => sub.stop()));
  const byTurn = new Map<number, number[]>();
  for (const h of handled) byTurn.set(h.turn, [...(byTurn.get(h.turn) ?? []), h.sub]);
  // The first batch of each runs when it starts, before it yields; every later one waits its turn.
  const started = Math.max(...[0, 1, 2].map((i) => handled.find((h) => h.sub === i)!.turn));
  const crowded = [...byTurn.entries()].filter(([t, subsInTurn]) => t > started && subsInTurn.length > 1);
  assert.deepEqual(crowded, [], "no turn after the first batches ran more than one subscription's batch");
});
