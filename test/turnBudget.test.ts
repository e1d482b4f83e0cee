import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createTurnBudget } from '../src/turnBudget.ts';

// A job's slice of the event loop is bounded by time: spent once it has run sliceMs, and a new
// slice begins when the loop comes back to it.

test('a slice is spent once it has run sliceMs, and the next begins after a turn of the loop', async () => {
  let t = 1_000;
  const budget = createTurnBudget({ sliceMs: 2, now: () => t });
  assert.equal(budget.spent(), false);
  t += 1.9;
  assert.equal(budget.spent(), false);
  t += 0.1;
  assert.equal(budget.spent(), true);
  // What the loop runs while the job gives its turn away.
  let ranBetween = false;
  setImmediate(() => {
    ranBetween = true;
  });
  await budget.nextSlice();
  assert.equal(ranBetween, true, 'another callback ran in the turn given away');
  assert.equal(budget.spent(), false, 'a new slice began when the job came back');
  t += 5;
  assert.equal(budget.spent(), true);
});

test('a slice of 0 ms is always spent: a turn at every item', () => {
  const budget = createTurnBudget({ sliceMs: 0, now: () => 0 });
  assert.equal(budget.spent(), true);
});
