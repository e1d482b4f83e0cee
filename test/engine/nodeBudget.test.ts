import assert from 'node:assert/strict';
import { test } from 'node:test';
import { costOf, createNodeBudget, sweepPerTake } from '../../src/engine/nodeBudget.ts';

// The per-node budget, on a clock the test moves.

test('a node spends its burst at once, then what it refills at its rate; other nodes keep their own', () => {
  let now = 0;
  const budget = createNodeBudget({ ratePerSecond: 10, burst: 5, now: () => now });
  const taken = (node: string, n: number): number => Array.from({ length: n }, () => budget.take(node)).filter(Boolean).length;
  assert.equal(taken('flood', 20), 5, 'the burst');
  assert.equal(taken('quiet', 1), 1, 'another node is not charged for the flood');
  now += 300;
  assert.equal(taken('flood', 20), 3, '300 ms at 10/s');
  now += 60_000;
  assert.equal(taken('flood', 20), 5, 'a long quiet spell refills to the burst, never beyond');
});

test('a message costs one unit per started 4 KiB, and one dearer than the burst passes only from a full bucket', () => {
  assert.deepEqual([0, 1, 4096, 4097, 256 * 1024].map(costOf), [1, 1, 1, 2, 64]);
  let now = 0;
  const budget = createNodeBudget({ ratePerSecond: 10, burst: 20, now: () => now });
  assert.equal(budget.take('n', 64), true, 'a full bucket lets one maximal body through');
  assert.equal(budget.take('n', 1), false, 'and is in debt after it');
  now += 4_400; // 44 units: back to zero from -44
  assert.equal(budget.take('n', 1), false);
  now += 200;
  assert.equal(budget.take('n', 1), true);
});

test('buckets of nodes gone quiet long enough to be full again are forgotten', () => {
  let now = 0;
  const budget = createNodeBudget({ ratePerSecond: 10, burst: 10, now: () => now });
  for (let i = 0; i < 100; i++) budget.take(`n${i}`);
  assert.equal(budget.size(), 100);
  now += 1_000; // burst / rate
  budget.take('n0');
  assert.equal(budget.size(), 1);
});

test('a sweep forgets a few buckets a take, and every full one by the end of its pass', () => {
  let now = 0;
  const budget = createNodeBudget({ ratePerSecond: 10, burst: 10, now: () => now });
  const quiet = 10 * sweepPerTake;
  for (let i = 0; i < quiet; i++) budget.take(`q${i}`);
  now += 1_000; // burst / rate: every bucket is full again
  budget.take('busy0');
  assert.ok(budget.size() >= quiet + 1 - sweepPerTake, `one take looks at no more than ${sweepPerTake} buckets (${budget.size()} left)`);
  for (let i = 1; i < 20; i++) budget.take(`busy${i}`);
  // By then the pass has looked at every bucket: the quiet ones went, the busy ones (one unit
  // spent just now) stay.
  assert.equal(budget.size(), 20);
});
