import assert from 'node:assert/strict';
import { test } from 'node:test';
import { foldNodeEvents, percentile, summarizeFleet } from '../../../projections/index.ts';
import { specDigestOf } from '../../../src/core/declaration/index.ts';
import { history } from '../../support/history.ts';

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
  assert.deepEqual(f.byLiveness, { connected: 4, disconnected: 0, 'never-seen': 1, 'not-observed': 0 });
  assert.equal(f.convergence.samples, 3);
  assert.equal(f.convergence.p50Ms, 2000);
  assert.equal(f.convergence.maxMs, 3000);
  assert.equal(f.anomalies.unknown, 1);
  // Every node got its own serial-1 declaration (unique digests), but the same spec: one cohort.
  assert.equal(f.cohorts.length, 1);
  assert.deepEqual(f.cohorts[0], {
    spec: specDigestOf([{ id: 'web' }]),
    nodes: 5,
    caughtUp: 3,
    byStatus: { undeclared: 0, behind: 2, refused: 0, degraded: 0, converged: 3 },
  });
  assert.deepEqual(f.otherCohorts, { cohorts: 0, nodes: 0, caughtUp: 0 });
});

test('cohorts group nodes by the spec digest of their latest send, not by declaration digest', () => {
  const states = [];
  for (const [node, resources, reply] of [
    ['a', [{ id: 'web' }], 'apply'],
    ['b', [{ id: 'web' }], 'refuse'],
    ['c', [{ id: 'db' }], 'none'],
  ] as const) {
    const h = history(node);
    const d = h.send(resources);
    if (reply === 'apply') h.report({ applied: ['web'], declared: d.data.digest });
    if (reply === 'refuse') h.report({ refused: 'no', declared: d.data.digest });
    states.push(foldNodeEvents(node, h.events));
  }
  states.push(foldNodeEvents('d', history('d').events)); // never sent anything: no cohort
  const f = summarizeFleet(states, Date.parse('2026-11-29T14:00:00Z'), 60_000);
  assert.deepEqual(
    f.cohorts.map((c) => [c.spec, c.nodes, c.caughtUp, c.byStatus.refused, c.byStatus.behind]),
    [
      [specDigestOf([{ id: 'web' }]), 2, 2, 1, 0],
      [specDigestOf([{ id: 'db' }]), 1, 0, 0, 1],
    ],
  );
});

test('only the largest cohorts are listed; the rest are summed', () => {
  const states = [];
  for (let i = 0; i < 12; i++) {
    for (let k = 0; k <= i; k++) {
      const h = history(`s${i}-${k}`);
      h.send([{ id: `spec-${i}` }]);
      states.push(foldNodeEvents(`s${i}-${k}`, h.events));
    }
  }
  const f = summarizeFleet(states, Date.now(), 60_000, { topCohorts: 3 });
  assert.deepEqual(
    f.cohorts.map((c) => c.nodes),
    [12, 11, 10],
  );
  assert.deepEqual(f.otherCohorts, { cohorts: 9, nodes: 45, caughtUp: 0 });
});

test('the spec digest ignores resource order and key order, and changes with any value', () => {
  const a = specDigestOf([{ id: 'web', image: 'nginx', ports: [80] }, { id: 'db' }]);
  assert.equal(a, specDigestOf([{ id: 'db' }, { ports: [80], image: 'nginx', id: 'web' }]));
  assert.notEqual(a, specDigestOf([{ id: 'web', image: 'nginx', ports: [81] }, { id: 'db' }]));
  assert.match(a, /^[0-9a-f]{64}$/);
});
