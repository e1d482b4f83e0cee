import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { foldNodeEvents } from '../../../projections/index.ts';
import type { Recorded } from '../../../src/core/events/index.ts';
import { history } from '../../support/history.ts';

// Random histories for one node, built through the same event constructors the engine uses.
type Cmd =
  | { kind: 'send'; resources: number }
  | { kind: 'report'; about: 'latest' | 'earlier' | 'unknown' | 'none'; applied: number; failed: number; refused: boolean }
  | { kind: 'alive' }
  | { kind: 'tick'; ms: number };

const cmd: fc.Arbitrary<Cmd> = fc.oneof(
  fc.record({ kind: fc.constant('send' as const), resources: fc.integer({ min: 0, max: 4 }) }),
  fc.record({
    kind: fc.constant('report' as const),
    about: fc.constantFrom('latest', 'earlier', 'unknown', 'none'),
    applied: fc.integer({ min: 0, max: 4 }),
    failed: fc.integer({ min: 0, max: 2 }),
    refused: fc.boolean(),
  }),
  fc.record({ kind: fc.constant('alive' as const) }),
  fc.record({ kind: fc.constant('tick' as const), ms: fc.integer({ min: 0, max: 120_000 }) }),
);

function run(cmds: readonly Cmd[]): Recorded[] {
  const h = history('n1');
  const digests: string[] = [];
  for (const c of cmds) {
    if (c.kind === 'send') digests.push(h.send(Array.from({ length: c.resources }, (_, i) => ({ id: `r${i}` }))).data.digest);
    else if (c.kind === 'alive') h.alive();
    else if (c.kind === 'tick') h.tick(c.ms);
    else {
      const declared =
        c.about === 'none'
          ? null
          : c.about === 'unknown'
            ? 'e'.repeat(64)
            : c.about === 'latest'
              ? (digests.at(-1) ?? null)
              : (digests.at(-2) ?? digests.at(-1) ?? null);
      h.report({
        declared,
        applied: Array.from({ length: c.applied }, (_, i) => `r${i}`),
        failed: Object.fromEntries(Array.from({ length: c.failed }, (_, i) => [`r${3 - i}`, 'broke'])),
        refused: c.refused ? 'no' : '',
      });
    }
  }
  return h.events;
}

const histories = fc.array(cmd, { maxLength: 60 }).map(run);

test('folding all at once equals folding in any two chunks (replay equals live)', () => {
  fc.assert(
    fc.property(histories, fc.nat(), (events, cut) => {
      const i = events.length === 0 ? 0 : cut % (events.length + 1);
      const whole = foldNodeEvents('n1', events);
      const chunked = foldNodeEvents('n1', events.slice(i), foldNodeEvents('n1', events.slice(0, i)));
      assert.deepEqual(chunked, whole);
    }),
    { numRuns: 300 },
  );
});

test('caughtUp is true exactly when the last report names the last sent digest', () => {
  fc.assert(
    fc.property(histories, (events) => {
      const lastSent = events.filter((e) => e.type === 'DeclarationSent').at(-1);
      const lastReport = events.filter((e) => e.type === 'ReportReceived').at(-1);
      const expected = !!lastSent && !!lastReport && lastReport.data.declared === lastSent.data.digest;
      const s = foldNodeEvents('n1', events);
      assert.equal(s.caughtUp, expected);
      assert.equal(s.status === 'undeclared', lastSent === undefined);
      if (!expected && lastSent) assert.equal(s.status, 'behind');
      if (expected) assert.ok(['refused', 'degraded', 'converged'].includes(s.status));
    }),
    { numRuns: 500 },
  );
});

test('every non-matching report is counted in exactly one anomaly and none is dropped', () => {
  fc.assert(
    fc.property(histories, (events) => {
      const s = foldNodeEvents('n1', events);
      const reports = events.filter((e) => e.type === 'ReportReceived').length;
      assert.equal(s.reports, reports);
      assert.ok(s.anomalies.stale + s.anomalies.unknown + s.anomalies.undeclared <= reports);
      assert.ok(s.convergence.acknowledged + s.anomalies.stale + s.anomalies.unknown + s.anomalies.undeclared <= reports);
    }),
    { numRuns: 300 },
  );
});

test('no sequence of events makes the fold throw', () => {
  fc.assert(
    fc.property(histories, (events) => {
      foldNodeEvents('n1', events);
    }),
    { numRuns: 300 },
  );
});
