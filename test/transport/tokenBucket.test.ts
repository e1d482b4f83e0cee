import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { createTokenBucket } from '../../src/transport/tokenBucket.ts';

// A fake clock: waiting moves it, so the bucket's arithmetic is checked without real time.
function fakeClock(): { now: () => number; wait: (ms: number) => Promise<void> } {
  let t = 0;
  return { now: () => t, wait: async (ms) => void (t += ms) };
}

test('a token bucket lets through at most burst + rate × elapsed takes', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 1, max: 500 }),
      fc.integer({ min: 1, max: 50 }),
      fc.integer({ min: 1, max: 400 }),
      async (rate, burst, n) => {
        const clock = fakeClock();
        const bucket = createTokenBucket({ ratePerSecond: rate, burst, ...clock });
        for (let i = 0; i < n; i++) {
          await bucket.take();
          const allowed = burst + (clock.now() * rate) / 1000;
          assert.ok(i + 1 <= allowed + 1e-9, `take ${i + 1} at ${clock.now()} ms exceeds ${allowed}`);
        }
        // And it does not hold back more than it must: the last take came no later than the rate requires, plus a ms of rounding per take.
        assert.ok(clock.now() <= (Math.max(0, n - burst) * 1000) / rate + n, `${n} takes took ${clock.now()} ms at ${rate}/s`);
      },
    ),
    { numRuns: 200 },
  );
});

test('concurrent takes are served in order, and an aborted take returns without a token', async () => {
  const clock = fakeClock();
  const bucket = createTokenBucket({ ratePerSecond: 10, burst: 1, ...clock });
  const order: number[] = [];
  await Promise.all([1, 2, 3].map((i) => bucket.take().then(() => order.push(i))));
  assert.deepEqual(order, [1, 2, 3]);
  const ac = new AbortController();
  ac.abort();
  const before = clock.now();
  await bucket.take(ac.signal);
  assert.equal(clock.now(), before, 'an aborted take waits for nothing');
});

test('a rate that is not a positive number is refused', () => {
  assert.throws(() => createTokenBucket({ ratePerSecond: 0 }), /positive/);
  assert.throws(() => createTokenBucket({ ratePerSecond: Number.NaN }), /positive/);
});
