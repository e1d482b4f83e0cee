import assert from 'node:assert/strict';
import { test } from 'node:test';
import { foldNodeEvents, percentile, summarizeFleet } from '../../projections/index.ts';
import { history } from '../support/history.ts';

test('percentiles are nearest-rank and empty samples give null', () => {
  assert.equal(percentile([], 50), null);
  assert.equal(percentile([10], 99), 10);
  const xs = Array.from({ length: 100 }, (_, i) => i + 1);
  assert.equal(percentile(xs, 50), 50);
  assert.equal(percentile(xs, 99), 99);
  assert.equal(percentile(xs, 100), 100);
});

test('the fleet summary counts status and liveness, groups nodes by the digest they run, and gives latency percentiles', () => {
  const states = [];
  const start = Date.parse('2026-11-29T14:00:00Z');
  let shared: string | null = null;
  for (let i = 0; i < 5; i++) {
    const h = history(`n${i}`, start);
    const a = h.send();
    shared ??= a.data.digest;
    h.tick(1000 * (i + 1));
    if (i < 3) h.report({ applied: ['web'], declared: a.data.digest });
    if (i === 3) h.report({ applied: [], declared: 'f'.repeat(64) });
    states.push(foldNodeEvents(`n${i}`, h.events));
  }
  const now = start + 30_000;
  const f = summarizeFleet(states, now, 60_000);
  assert.equal(f.nodes, 5);
  assert.deepEqual(f.byStatus, { undeclared: 0, behind: 2, refused: 0, degraded: 0, converged: 3 });
  assert.deepEqual(f.byLiveness, { connected: 4, disconnected: 0, 'never-seen': 1 });
  assert.equal(f.convergence.samples, 3);
  assert.equal(f.convergence.p50Ms, 2000);
  assert.equal(f.convergence.maxMs, 3000);
  assert.equal(f.anomalies.unknown, 1);
  // Every node got its own serial-1 declaration, so each caught-up node is its own cohort.
  assert.equal(f.cohorts.length, 4);
  assert.ok(f.cohorts.every((c) => c.nodes === 1));
  assert.equal(f.cohorts.filter((c) => c.caughtUp === 1).length, 3);
});

test('a node that refused a declaration is in no digest cohort: it does not run it', () => {
  const h = history('n1');
  const a = h.send();
  h.report({ refused: 'signature does not verify', declared: a.data.digest });
  const refused = foldNodeEvents('n1', h.events);
  assert.equal(refused.status, 'refused');
  const g = history('n2');
  const b = g.send();
  g.report({ applied: ['web'], declared: b.data.digest });
  const f = summarizeFleet([refused, foldNodeEvents('n2', g.events)], h.now(), 60_000);
  assert.deepEqual(f.cohorts, [{ digest: b.data.digest, nodes: 1, caughtUp: 1 }]);
});
