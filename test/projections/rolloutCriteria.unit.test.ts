import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseCriteria } from '../../src/core/rollout/index.ts';
import type { Decision } from '../../src/core/rollout/index.ts';
import type { AbortCriterion } from '../../src/core/events/index.ts';
import { world } from '../support/rolloutWorld.ts';

// The decision under abort criteria by class, on waves of 1, 3 and 9 nodes: which failures spend
// the budget, when a percentage of the settled nodes may trip, and what the halt and the completed
// wave record.

const criteria = (text: string): AbortCriterion[] => {
  const c = parseCriteria(text, 'fail');
  assert.ok(typeof c !== 'string', c as string);
  return c;
};
const kinds = (ds: readonly Decision[]): string[] => ds.map((d) => (d.kind === 'wait' ? `wait(${d.why})` : d.kind));
const halted = (d: Decision) => {
  assert.equal(d.kind, 'halt', JSON.stringify(d));
  return (d as Extract<Decision, { kind: 'halt' }>).data;
};

test('1 node: a class no criterion names halts nothing by itself, but a lone canary not done still halts (no proof)', () => {
  const w = world('c1', ['a'], { waves: '100%', criteria: criteria('degraded:0') });
  w.run();
  w.h('a').report({ refused: 'no room', declared: w.digestSentTo('a') });
  const d = halted(w.decide());
  assert.equal(d.why, 'noneDone', 'refused is not counted by degraded:0: the halt is for want of proof, not the criteria');
  assert.equal(d.criterion, undefined);
});

test('3 nodes, refused:50%@2: no trip before 2 settled; 1 of 2 is within 50%; 2 of 3 is over (50% of 3 rounds down to 1)', () => {
  const w = world('c3', ['a', 'b', 'c'], { waves: '100%', criteria: criteria('refused:50%@2') });
  w.run();
  w.h('a').report({ refused: 'no room', declared: w.digestSentTo('a') });
  assert.equal(w.decide().kind, 'wait', '1 settled, fewer than the 2 the percentage waits for');
  w.h('b').report({ applied: ['web'], declared: w.digestSentTo('b') });
  assert.equal(w.decide().kind, 'wait', '1 failure of 2 settled: 50% of 2 allows 1');
  w.h('c').report({ refused: 'no room', declared: w.digestSentTo('c') });
  const d = halted(w.decide());
  assert.equal(d.why, 'overBudget');
  assert.deepEqual(d.criterion, { asGiven: 'refused:50%@2', classes: ['refused'], failures: 2, allowed: 1, settled: 3 });
  assert.equal(d.failures, 2);
  assert.equal(d.maxFailures, 1);
  w.apply(w.decide());
  assert.equal(w.state().halted?.criterion?.asGiven, 'refused:50%@2', 'the halt records the criterion that tripped');
});

test('9 nodes, refused+degraded:10%: 10% of any settled count under 10 rounds down to none, so the first failure halts', () => {
  const nodes = Array.from({ length: 9 }, (_, i) => `n${i + 1}`);
  const w = world('c9', nodes, { waves: '1,100%', criteria: criteria('refused+degraded:10%') });
  w.run();
  w.h('n1').report({ applied: ['web'], declared: w.digestSentTo('n1') });
  assert.deepEqual(kinds(w.run()), ['completeWave', 'startWave', 'send', 'wait(8 node(s) of wave 2 still behind)']);
  w.h('n2').report({ applied: ['web'], declared: w.digestSentTo('n2') });
  w.h('n3').report({ applied: [], failed: { web: 'pull failed' }, declared: w.digestSentTo('n3') });
  const d = halted(w.decide());
  assert.deepEqual(d.criterion, { asGiven: 'refused+degraded:10%', classes: ['refused', 'degraded'], failures: 1, allowed: 0, settled: 3 });
  assert.deepEqual(
    d.failed.map((f) => [f.node, f.reason]),
    [['n3', 'degraded']],
  );
});

test('a class not counted is recorded by class in the completed wave and the rollout, and spends nothing', () => {
  const w = world('cc', ['a', 'b', 'c'], { waves: '100%', criteria: criteria('refused:0') });
  w.run();
  w.h('a').report({ applied: ['web'], declared: w.digestSentTo('a') });
  w.h('b').report({ applied: [], failed: { web: 'pull failed' }, declared: w.digestSentTo('b') });
  w.h('c').report({ applied: ['web'], declared: w.digestSentTo('c') });
  assert.deepEqual(kinds(w.run()), ['completeWave', 'complete', 'wait(completed)']);
  const s = w.state();
  assert.deepEqual(s.waves[0]?.completed?.byClass, { degraded: 1 });
  assert.deepEqual(s.failedByClass, { degraded: 1 });
  assert.equal(s.status, 'completed');
});

test('at the timeout a connected node behind is a timeout and a disconnected one silent, each counted by its own criterion', () => {
  const make = (text: string) => {
    const w = world(`ct-${text.length}`, ['a', 'b', 'c'], { waves: '100%', timeoutMs: 120_000, graceMs: 60_000, criteria: criteria(text) });
    w.h('c').alive(); // c was connected before the rollout, then went quiet
    w.run();
    w.h('a').report({ applied: ['web'], declared: w.digestSentTo('a') });
    w.tick(120_000);
    w.h('b').alive(); // b is connected at the timeout, but never caught up
    return w;
  };
  const counted = make('silent:1');
  assert.deepEqual(
    kinds(counted.run()),
    ['completeWave', 'complete', 'wait(completed)'],
    'silent 1 is within silent:1; the timeout is not counted',
  );
  const wave = counted.state().waves[0]?.completed;
  assert.deepEqual(wave?.byClass, { timeout: 1, silent: 1 });
  assert.deepEqual(
    wave?.failures.map((f) => [f.node, f.reason]),
    [
      ['b', 'timeout'],
      ['c', 'silent'],
    ],
  );
  assert.match(wave?.failures[1]?.detail ?? '', /^silent: no sign of life since /);

  const strict = make('timeout:0,silent:1');
  const d = halted(strict.decide());
  assert.deepEqual(d.criterion, { asGiven: 'timeout:0', classes: ['timeout'], failures: 1, allowed: 0, settled: 3 });
});

test('a plan with a single budget keeps it: every class, superseded under fail, against maxFailures', () => {
  const w = world('cl', ['a', 'b', 'c'], { waves: '100%', maxFailures: 1, timeoutMs: 10_000 });
  w.run();
  w.h('a').report({ applied: ['web'], declared: w.digestSentTo('a') });
  w.h('b').report({ refused: 'no room', declared: w.digestSentTo('b') });
  assert.equal(w.decide().kind, 'wait', '1 failure is within the budget of 1');
  w.tick(10_000);
  const d = halted(w.decide());
  assert.equal(d.failures, 2);
  assert.equal(d.maxFailures, 1);
  assert.equal(d.criterion, undefined, 'a single budget records no criterion, as before');
});
