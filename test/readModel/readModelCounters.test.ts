import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { livenessAt, livenessStates, newerLastSeen, nodeStatuses, summarizeFleet } from '../../projections/index.ts';
import type { NodeState } from '../../projections/index.ts';
import type { Recorded } from '../../src/core/events/index.ts';
import { createReadModel } from '../../src/readModel/readModel.ts';
import type { NodePageQuery } from '../../src/readModel/readModel.ts';
import { history, historyStart } from '../support/history.ts';

// The read model answers GET /v1/nodes pages, GET /v1/fleet and the converge_nodes gauges from
// indexes and counters it keeps as events fold. Each must equal the same question
// answered the slow way, over every node state, at any moment.

type Step = Readonly<{ node: number; kind: 'send' | 'report' | 'stale' | 'unknown' | 'alive'; tick: number; spec: number }>;

const step = fc.record({
  node: fc.integer({ min: 0, max: 11 }),
  kind: fc.constantFrom('send', 'report', 'stale', 'unknown', 'alive'),
  tick: fc.integer({ min: 0, max: 90_000 }),
  spec: fc.integer({ min: 0, max: 2 }),
}) as fc.Arbitrary<Step>;

/** Events of several nodes on one clock, in the order they happened, with store positions. */
function run(steps: readonly Step[]): { events: Recorded[]; end: number } {
  let clock = historyStart;
  const nodes = new Map<number, ReturnType<typeof history>>();
  const digests = new Map<number, string[]>();
  const events: Recorded[] = [];
  for (const s of steps) {
    clock += s.tick;
    let h = nodes.get(s.node);
    if (h === undefined) nodes.set(s.node, (h = history(`n${String(s.node).padStart(2, '0')}`, clock)));
    h.tick(Math.max(0, clock - h.now().getTime()));
    const sent = digests.get(s.node) ?? [];
    const e =
      s.kind === 'send'
        ? h.send([{ id: 'web', v: s.spec }])
        : s.kind === 'report'
          ? h.report({ declared: sent.at(-1) ?? null, applied: s.spec === 0 ? ['web'] : [] })
          : s.kind === 'stale'
            ? h.report({ declared: sent[0] ?? null, applied: ['web'] })
            : s.kind === 'unknown'
              ? h.report({ declared: 'f'.repeat(64) })
              : h.alive();
    if (e.type === 'DeclarationSent') digests.set(s.node, [...sent, e.data.digest]);
    events.push({ ...e, position: BigInt(events.length + 1) } as Recorded);
  }
  return { events, end: clock };
}

const byId = (a: NodeState, b: NodeState): number => (a.node < b.node ? -1 : a.node > b.node ? 1 : 0);

test('pages of nodes from the index equal filtering and sorting every state, for any filter and cursor', () => {
  fc.assert(
    fc.property(
      fc.array(step, { minLength: 1, maxLength: 120 }),
      fc.record({
        status: fc.option(fc.constantFrom(...nodeStatuses), { nil: undefined }),
        liveness: fc.option(fc.constantFrom(...livenessStates), { nil: undefined }),
        after: fc.option(
          fc.integer({ min: 0, max: 12 }).map((i) => `n${String(i).padStart(2, '0')}`),
          { nil: undefined },
        ),
        limit: fc.integer({ min: 1, max: 5 }),
        withSpec: fc.boolean(),
      }),
      fc.integer({ min: 0, max: 200_000 }),
      (steps, q, later) => {
        const { events, end } = run(steps);
        const now = end + later;
        const model = createReadModel({ graceMs: 60_000, now: () => end });
        model.apply(events);
        const all = [...model.nodes()].sort(byId);
        const spec = q.withSpec ? all.find((s) => s.sent !== null)?.sent?.specDigest : undefined;
        const query: NodePageQuery = { status: q.status, liveness: q.liveness, spec, after: q.after, limit: q.limit };
        const matching = all.filter(
          (s) =>
            (q.status === undefined || s.status === q.status) &&
            (q.liveness === undefined || livenessAt(s.lastSeenAt, now, 60_000).state === q.liveness) &&
            (spec === undefined || s.sent?.specDigest === spec),
        );
        const from = matching.filter((s) => q.after === undefined || s.node > q.after);
        const page = model.page(query, now);
        assert.deepEqual(
          page.states.map((s) => s.node),
          from.slice(0, q.limit).map((s) => s.node),
        );
        assert.equal(page.total, matching.length);
        assert.equal(page.next, from.length > q.limit ? from[q.limit - 1]!.node : null);
      },
    ),
    { numRuns: 200 },
  );
});

test('the fleet summary from counters equals summarizeFleet over every state, at any later moment', () => {
  fc.assert(
    fc.property(
      fc.array(step, { minLength: 1, maxLength: 150 }),
      fc.array(fc.integer({ min: 0, max: 100_000 }), { maxLength: 4 }),
      (steps, laters) => {
        const { events, end } = run(steps);
        const model = createReadModel({ graceMs: 60_000, now: () => end });
        // Folded in two goes, as batches arrive.
        const half = Math.floor(events.length / 2);
        model.apply(events.slice(0, half));
        model.apply(events.slice(half));
        let now = end;
        for (const later of laters) {
          now += later;
          assert.deepEqual(model.fleet(now), summarizeFleet(model.nodes(), now, 60_000));
          const counts = model.liveness(now);
          for (const status of nodeStatuses) {
            for (const liveness of livenessStates) {
              const expected = [...model.nodes()].filter(
                (s) => s.status === status && livenessAt(s.lastSeenAt, now, 60_000).state === liveness,
              ).length;
              assert.equal(counts.get(status, liveness), expected, `${status}/${liveness} at +${now - end} ms`);
            }
          }
        }
      },
    ),
    { numRuns: 200 },
  );
});

test('liveness counts use the exact last-seen time when it is newer, and follow a clock that goes back', () => {
  const h = history('x1');
  const e = { ...h.alive(), position: 1n } as Recorded;
  const seenAt = h.now().getTime();
  let exact: Date | null = null;
  const model = createReadModel({ graceMs: 60_000, lastSeen: () => exact, now: () => seenAt });
  model.apply([e]);
  const connected = (now: number): number => model.liveness(now).get('undeclared', 'connected');
  assert.equal(connected(seenAt + 60_000), 1);
  assert.equal(connected(seenAt + 60_001), 0, 'quiet for longer than the grace');
  exact = new Date(seenAt + 50_000); // heard by the ingest, coalesced in the store (docs/design.md §2)
  assert.equal(connected(seenAt + 100_000), 0, 'already judged disconnected: only a fold brings it back');
  assert.equal(connected(seenAt + 30_000), 1, 'a clock that went back judges everyone again');
  assert.equal(connected(seenAt + 110_000), 1, 'the exact time keeps it connected past the folded one');
  assert.equal(connected(seenAt + 110_001), 0);
  assert.equal(
    livenessAt(newerLastSeen(model.get('x1')!.lastSeenAt, exact), seenAt + 110_000, 60_000).state,
    'connected',
    'as the API reports it',
  );
});
