import assert from 'node:assert/strict';
import { test } from 'node:test';
import { allowedBy, notConnectedAt, parseCriteria, tripped } from '../../../src/core/rollout/index.ts';
import { abortCriterion } from '../../../src/core/events/index.ts';
import type { AbortCriterion } from '../../../src/core/events/index.ts';
import { livenessAt } from '../../../projections/index.ts';

// Abort criteria by failure class, without a rollout: the grammar, the rounding of a percentage,
// the minimum settled before a percentage may trip, and which classes a criterion counts.

const parsed = (text: string, policy: 'fail' | 'hold' = 'fail'): AbortCriterion[] => {
  const c = parseCriteria(text, policy);
  assert.ok(typeof c !== 'string', c as string);
  return c;
};

test('criteria: classes joined by +, a count or a percentage with @min settled; any is every class the policy allows', () => {
  assert.deepEqual(parsed('refused+degraded:2, silent:10%@5'), [
    { classes: ['refused', 'degraded'], count: 2, minSettled: 0, asGiven: 'refused+degraded:2' },
    { classes: ['silent'], percent: 10, minSettled: 5, asGiven: 'silent:10%@5' },
  ]);
  assert.deepEqual(parsed('timedOut:25%')[0], { classes: ['timeout'], percent: 25, minSettled: 1, asGiven: 'timedOut:25%' });
  assert.deepEqual(parsed('any:0')[0]?.classes, ['refused', 'degraded', 'timeout', 'silent', 'unsendable', 'superseded']);
  assert.deepEqual(parsed('any:0', 'hold')[0]?.classes, ['refused', 'degraded', 'timeout', 'silent', 'unsendable']);
});

test('criteria: what cannot be a criterion is refused, saying why', () => {
  assert.match(parseCriteria('broken:1', 'fail') as string, /"broken" is not a failure class/);
  assert.match(parseCriteria('superseded:1', 'hold') as string, /superseded is no failure under onSuperseded hold/);
  assert.match(parseCriteria('refused:3@2', 'fail') as string, /@min applies to a percentage only/);
  assert.match(parseCriteria('refused:101%', 'fail') as string, /over 100%/);
  assert.match(parseCriteria('refused:1.5', 'fail') as string, /whole number/);
  assert.match(parseCriteria('refused:1,', 'fail') as string, /separated by commas/);
  assert.match(parseCriteria('refused', 'fail') as string, /is not class/);
});

test('a stored criterion has a count or a percentage, never both nor neither', () => {
  const base = { classes: ['refused'], minSettled: 0, asGiven: 'x' };
  assert.equal(abortCriterion.safeParse({ ...base, count: 1 }).success, true);
  assert.equal(abortCriterion.safeParse({ ...base, count: 1, percent: 5 }).success, false);
  assert.equal(abortCriterion.safeParse(base).success, false);
});

test('a percentage of the settled nodes rounds down: small waves of 1, 3 and 9 nodes', () => {
  const pct = (percent: number, minSettled = 1): AbortCriterion => ({ classes: ['refused'], percent, minSettled, asGiven: '' });
  // 1 node: any percentage under 100 allows no failure; 100% allows the one.
  assert.equal(allowedBy(pct(50), 1), 0);
  assert.equal(allowedBy(pct(100), 1), 1);
  // 3 nodes: 50% allows 1 (1.5 down), 34% allows 1, 33% allows 0 (0.99 down).
  assert.equal(allowedBy(pct(50), 3), 1);
  assert.equal(allowedBy(pct(34), 3), 1);
  assert.equal(allowedBy(pct(33), 3), 0);
  // 9 nodes: 10% allows none (0.9 down), 20% allows 1.
  assert.equal(allowedBy(pct(10), 9), 0);
  assert.equal(allowedBy(pct(20), 9), 1);
  // Before `minSettled` nodes settled a percentage cannot trip; a count always can.
  assert.equal(allowedBy(pct(10, 5), 4), null);
  assert.equal(allowedBy(pct(10, 5), 5), 0);
  assert.equal(allowedBy({ classes: ['refused'], count: 2, minSettled: 0, asGiven: '' }, 0), 2);
});

test('a criterion counts only its classes; failures recorded before classes count only for a criterion over every class', () => {
  const [degraded, any] = parsed('degraded:0,any:3');
  const t = { byClass: { refused: 2 }, unclassified: 2, settled: 10 };
  assert.equal(tripped([degraded!], t), null, 'refused is not degraded');
  assert.deepEqual(tripped([degraded!, any!], t), { criterion: any, failures: 4, allowed: 3, settled: 10 });
});

test("a late node is silent exactly when the node fold's liveness says it is not connected", () => {
  const now = Date.parse('2026-11-30T14:00:00Z');
  for (const lastSeenAt of [null, '2026-11-30T13:59:00Z', '2026-11-30T13:58:59.999Z', '2026-11-30T13:00:00Z', '2026-11-30T14:00:00Z']) {
    assert.equal(notConnectedAt(lastSeenAt, now, 60_000), livenessAt(lastSeenAt, now, 60_000).state !== 'connected', String(lastSeenAt));
  }
});
