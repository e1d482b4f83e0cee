import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createLatencyHistogram } from '../../projections/index.ts';
import type { RolloutState } from '../../src/core/rollout/index.ts';
import { progressOf } from '../../src/readModel/rolloutProgress.ts';
import { zero } from '../../src/readModel/rolloutViewTypes.ts';
import type { Counts, Entry, Lookup, Tracked } from '../../src/readModel/rolloutViewTypes.ts';

// The open wave's progress as the view answers it to the driver: counts kept as events fold,
// lists built from the wave's targets only when asked, and only when the count says there is
// something to list. A wave's completion asks for its superseded nodes; walking 50,000 nodes
// to find none made the longest of the driver's turns in a 100,000-node rollout.

const size = 2_000;
const targets = Array.from({ length: size }, (_, i) => `n-${String(i).padStart(4, '0')}`);
const state = {
  id: 'r1',
  current: 1,
  targets,
  waves: [{ wave: 1, from: 0, to: size, startedAt: '2026-11-30T14:00:00.000Z', completed: null }],
} as unknown as RolloutState;

function tracked(counts: Partial<Counts>, outcomes: ReadonlyMap<string, Entry['outcome']>) {
  const r: Tracked = { state, counts: [{ ...zero(), ...counts }], latencies: createLatencyHistogram(), firstSentMs: null, position: 0n };
  let looked = 0;
  const lookup: Lookup = {
    entryOf: (_r, node) => {
      looked++;
      const outcome = outcomes.get(node) ?? 'done';
      return { r, wave: 1, send: undefined, skip: undefined, outcome, measured: false, reports: 1 };
    },
    nodeOf: () => undefined,
  };
  return { r, lookup, looked: () => looked };
}

test('a wave with no superseded node lists none without looking at its nodes', () => {
  const t = tracked({ done: size }, new Map());
  const p = progressOf(t.r, t.lookup, 60_000);
  assert.ok(p !== null);
  assert.deepEqual(p.supersededNodes(), []);
  assert.deepEqual(p.failures, []);
  assert.deepEqual(p.unsent, []);
  assert.equal(t.looked(), 0, 'no node of the wave was looked at');
});

test('a wave with superseded nodes lists them in wave order', () => {
  const t = tracked(
    { done: size - 2, superseded: 2 },
    new Map([
      ['n-1500', 'superseded'],
      ['n-0007', 'superseded'],
    ]),
  );
  const p = progressOf(t.r, t.lookup, 60_000);
  assert.ok(p !== null);
  assert.deepEqual(p.supersededNodes(), ['n-0007', 'n-1500']);
});
