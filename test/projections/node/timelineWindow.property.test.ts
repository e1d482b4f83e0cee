import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { eventTime, isBeforeMoment, timelineWindow, windowEnough } from '../../../projections/index.ts';
import type { At, TimelineWindow } from '../../../projections/index.ts';
import type { Recorded } from '../../../src/core/events/index.ts';
import { history } from '../../support/history.ts';

// `history --from` from a suffix of the stream (projections/node/timelineWindow.ts): whenever
// windowEnough accepts a suffix that leaves out only events before `from`, the window's entries and
// declarations are those the whole stream gives. Histories with duplicate report ids, stale and
// unknown digests, clocks that step back, and sends older than the fold keeps.

type Cmd =
  | { kind: 'send'; resources: number }
  | { kind: 'report'; about: 'sent' | 'unknown' | 'none'; back: number; applied: number; refused: boolean }
  | { kind: 'again'; same: boolean }
  | { kind: 'alive' }
  | { kind: 'tick'; ms: number };

const cmd: fc.Arbitrary<Cmd> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('send' as const), resources: fc.integer({ min: 0, max: 3 }) }) },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('report' as const),
      about: fc.constantFrom('sent', 'sent', 'sent', 'unknown', 'none'),
      // 1: the latest send; up to 12: older than the 8 the fold keeps.
      back: fc.integer({ min: 1, max: 12 }),
      applied: fc.integer({ min: 0, max: 3 }),
      refused: fc.boolean(),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('again' as const), same: fc.boolean() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('alive' as const) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('tick' as const), ms: fc.integer({ min: -50_000, max: 120_000 }) }) },
);

function run(cmds: readonly Cmd[]): Recorded[] {
  const h = history('n1');
  const digests: string[] = [];
  let lastReport: Recorded | null = null;
  for (const c of cmds) {
    if (c.kind === 'send') digests.push(h.send(Array.from({ length: c.resources }, (_, i) => ({ id: `r${i}` }))).data.digest);
    else if (c.kind === 'alive') h.alive();
    else if (c.kind === 'tick') h.tick(c.ms);
    else if (c.kind === 'again') {
      // A report's id stored again: a retry of an archived event (the same data), or, hostile, other data.
      if (lastReport !== null) {
        const data = c.same ? lastReport.data : { ...lastReport.data, declared: digests.at(-1) ?? null, refused: 'again' };
        h.events.push({ ...lastReport, data, revision: BigInt(h.events.length), position: BigInt(h.events.length + 1) * 10n } as Recorded);
      }
    } else {
      const declared =
        c.about === 'none' ? null : c.about === 'unknown' ? 'e'.repeat(64) : (digests[Math.max(0, digests.length - c.back)] ?? null);
      lastReport = h.report({
        declared,
        applied: Array.from({ length: c.applied }, (_, i) => `r${i}`),
        refused: c.refused ? 'no' : '',
      });
    }
  }
  return h.events;
}

const window = (
  events: readonly Recorded[],
  fromAt: number,
  toAt: number | null,
  byTime: boolean,
  limit: number | null,
): TimelineWindow => {
  const at = (i: number): At => {
    const e = events[Math.min(i, events.length - 1)]!;
    return byTime ? { kind: 'time', time: Date.parse(eventTime(e)), iso: eventTime(e) } : { kind: 'position', position: e.position };
  };
  return { from: at(fromAt), to: toAt === null ? null : at(toAt), limit: limit ?? Infinity };
};

test('an accepted suffix gives the window the whole stream gives', () => {
  let accepted = 0;
  fc.assert(
    fc.property(
      fc.array(cmd, { minLength: 1, maxLength: 120 }),
      fc.nat(),
      fc.option(fc.nat()),
      fc.boolean(),
      fc.option(fc.integer({ min: 1, max: 6 })),
      (cmds, fromAt, toAt, byTime, limit) => {
        const events = run(cmds);
        if (events.length === 0) return;
        const w = window(events, fromAt % events.length, toAt === null ? null : toAt % events.length, byTime, limit);
        const whole = timelineWindow('n1', events, w);
        const enough = windowEnough('n1', w);
        for (let k = 1; k < events.length; k++) {
          // What the reader leaves out is before `from`: past the first event that is not, it stops.
          if (!isBeforeMoment({ at: eventTime(events[k - 1]!), position: events[k - 1]!.position }, w.from)) break;
          const suffix = events.slice(k);
          if (!enough(suffix)) continue;
          accepted++;
          assert.deepEqual(timelineWindow('n1', suffix, w), whole, `suffix from revision ${k}`);
        }
      },
    ),
    { numRuns: 1500 },
  );
  // The property would hold of a predicate that never accepts: it must have accepted suffixes.
  assert.ok(accepted > 100, `${accepted} suffixes accepted`);
});

test('a named send before the window needs the reports before it: a report stored twice under one id is no acknowledgement', () => {
  const h = history('n1');
  const s1 = h.send();
  const r1 = h.report({ declared: s1.data.digest });
  const s2 = h.send();
  // r1's id again, naming s2: the fold takes it as a duplicate, so s2 is never acknowledged.
  h.events.push({ ...r1, data: { ...r1.data, declared: s2.data.digest }, revision: 3n, position: 40n } as Recorded);
  h.report();
  h.report();
  const s3 = h.send();
  h.report({ declared: s2.data.digest });
  const w: TimelineWindow = { from: { kind: 'position', position: s3.position }, to: null, limit: Infinity };
  const whole = timelineWindow('n1', h.events, w);
  assert.deepEqual(
    whole.declarations.map((d) => [d.serial, d.outcome]),
    [
      [2, 'superseded'],
      [3, 'pending'],
    ],
  );
  // From s2 on, the report before it is missing: r1's second copy would look new and acknowledge s2.
  assert.equal(windowEnough('n1', w)(h.events.slice(2)), false);
  assert.notDeepEqual(timelineWindow('n1', h.events.slice(2), w), whole);
  assert.equal(windowEnough('n1', w)(h.events), true);
});

test('the last report before the window must be one the fold took as new', () => {
  const h = history('n1');
  const r1 = h.report();
  const s1 = h.send();
  // r1's id again, naming s1: a duplicate, so the status stays behind.
  h.events.push({ ...r1, data: { ...r1.data, declared: s1.data.digest }, revision: 2n, position: 30n } as Recorded);
  const alive = h.alive();
  const w: TimelineWindow = { from: { kind: 'position', position: alive.position }, to: null, limit: Infinity };
  const whole = timelineWindow('n1', h.events, w);
  assert.deepEqual(
    whole.entries.map((e) => e.status),
    ['behind'],
  );
  assert.equal(windowEnough('n1', w)(h.events.slice(1)), false);
  assert.notDeepEqual(timelineWindow('n1', h.events.slice(1), w), whole);
});
