import { setImmediate as nextTurn } from 'node:timers/promises';
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createBackoff, retry, sleep } from '../src/retry.ts';

const delays = (n: number, b: { next: () => number }): number[] => Array.from({ length: n }, () => b.next());

test('backoff doubles from the first delay and never waits longer than the maximum', () => {
  assert.deepEqual(delays(8, createBackoff({ minMs: 50, maxMs: 1_000 })), [50, 100, 200, 400, 800, 1_000, 1_000, 1_000]);
});

test('reset starts the doubling again from the first delay', () => {
  const b = createBackoff({ minMs: 10, maxMs: 1_000 });
  delays(4, b);
  b.reset();
  assert.deepEqual(delays(2, b), [10, 20]);
});

test('jitter spreads each delay over ±the fraction asked, and the maximum still caps it', () => {
  const extremes = [0, 0.999_999];
  for (const r of extremes) {
    const got = delays(10, createBackoff({ minMs: 100, maxMs: 1_000, jitter: 0.5, random: () => r }));
    const bases = [100, 200, 400, 800, 1_000, 1_000, 1_000, 1_000, 1_000, 1_000];
    got.forEach((d, i) => {
      const base = bases[i]!;
      assert.ok(d >= Math.round(base * 0.5) && d <= Math.min(1_000, Math.round(base * 1.5)), `delay ${i}: ${d} for base ${base}`);
    });
  }
  // At the lowest draw the delay is half the base; at the highest, 1.5× it until the cap.
  assert.deepEqual(delays(3, createBackoff({ minMs: 100, maxMs: 1_000, jitter: 0.5, random: () => 0 })), [50, 100, 200]);
  assert.deepEqual(
    delays(5, createBackoff({ minMs: 100, maxMs: 1_000, jitter: 0.5, random: () => 0.999_999 })),
    [150, 300, 600, 1_000, 1_000],
  );
});

test('jitter draws different delays from Math.random by default, all within bounds', () => {
  const b = createBackoff({ minMs: 1_000, maxMs: 1_000, jitter: 0.5 });
  const got = delays(200, b);
  for (const d of got) assert.ok(d >= 500 && d <= 1_000, String(d));
  assert.ok(new Set(got).size > 10, 'jittered delays vary');
});

test('a backoff with a jitter outside [0, 1] or a maximum below its minimum is refused', () => {
  assert.throws(() => createBackoff({ minMs: 10, maxMs: 5 }), RangeError);
  assert.throws(() => createBackoff({ minMs: 10, maxMs: 50, jitter: 1.5 }), RangeError);
});

test('retry returns the value of the first attempt that succeeds, telling onError of each failure', async () => {
  const seen: number[] = [];
  let calls = 0;
  const r = await retry(
    async () => {
      if (++calls < 3) throw new Error(`fail ${calls}`);
      return 'ok';
    },
    { minMs: 1, maxMs: 2, signal: new AbortController().signal, onError: (_e, attempt) => seen.push(attempt) > 0 },
  );
  assert.deepEqual(r, { ok: true, value: 'ok' });
  assert.deepEqual(seen, [1, 2]);
});

test('retry gives up when onError says so, with the error that made it', async () => {
  const boom = new Error('cannot be fixed by waiting');
  let calls = 0;
  const r = await retry(
    async () => {
      calls++;
      throw boom;
    },
    { minMs: 1, maxMs: 2, signal: new AbortController().signal, onError: (e) => e !== boom },
  );
  assert.deepEqual(r, { ok: false, error: boom });
  assert.equal(calls, 1);
});

test('an abort during the wait ends retry at once instead of after the delay', async () => {
  const abort = new AbortController();
  let calls = 0;
  let settled = false;
  const done = retry(
    async () => {
      calls++;
      throw new Error('down');
    },
    { minMs: 60_000, maxMs: 60_000, signal: abort.signal },
  ).finally(() => (settled = true));
  await nextTurn();
  assert.equal(settled, false, 'waiting out the delay');
  abort.abort();
  await nextTurn();
  assert.equal(settled, true, 'ended by the abort, not by the 60 s delay');
  assert.deepEqual(await done, { ok: false, error: new Error('down') });
  assert.equal(calls, 1);
});

test('retry on a signal already aborted makes no attempt', async () => {
  const abort = new AbortController();
  abort.abort();
  let calls = 0;
  const r = await retry(async () => ++calls, { minMs: 1, maxMs: 1, signal: abort.signal });
  assert.deepEqual(r, { ok: false, error: undefined });
  assert.equal(calls, 0);
});

test('sleep resolves early when its signal aborts, and at once when it already has', async () => {
  const abort = new AbortController();
  let settled = false;
  const s = sleep(60_000, abort.signal).then(() => (settled = true));
  await nextTurn();
  assert.equal(settled, false);
  abort.abort();
  await s;
  let again = false;
  void sleep(60_000, abort.signal).then(() => (again = true));
  await nextTurn();
  assert.equal(again, true);
});
