import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createTurnBudget } from '../src/turnBudget.ts';
import { countLoopTurns } from './support/loopTurns.ts';

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

// Every job that gives the loop back through a budget waits in one queue: a turn of the loop runs
// one job's slice, not one slice of each, so jobs yielding together cannot add their slices up
// in front of a request.
test('jobs yielding together take turns: one slice a turn of the loop, in the order they yielded', async () => {
  const turns = countLoopTurns();
  const ran: { job: number; turn: number }[] = [];
  await Promise.all(
    [0, 1, 2].map(async (job) => {
      const budget = createTurnBudget({ sliceMs: 0 });
      for (let i = 0; i < 3; i++) {
        if (budget.spent()) await budget.nextSlice();
        ran.push({ job, turn: turns.now() });
      }
    }),
  );
  await turns.stop();
  const jobsByTurn = new Map<number, Set<number>>();
  for (const r of ran) jobsByTurn.set(r.turn, (jobsByTurn.get(r.turn) ?? new Set()).add(r.job));
  for (const [t, jobs] of jobsByTurn) assert.equal(jobs.size, 1, `turn ${t} ran the slices of jobs ${[...jobs].join(', ')}`);
  assert.deepEqual(
    ran.map((r) => r.job),
    [0, 1, 2, 0, 1, 2, 0, 1, 2],
  );
});

test('a job resumed in its turn keeps it while its slice lasts', async () => {
  let t = 0;
  const budget = createTurnBudget({ sliceMs: 2, now: () => t });
  const items: number[] = [];
  for (let i = 0; i < 6; i++) {
    if (budget.spent()) {
      items.push(-1);
      await budget.nextSlice();
    }
    items.push(i);
    t += 1;
  }
  assert.deepEqual(items, [0, 1, -1, 2, 3, -1, 4, 5]);
});
