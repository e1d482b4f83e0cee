import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { createReadModel } from '../../../src/readModel/readModel.ts';
import type { Recorded } from '../../../src/core/events/index.ts';

// The fleet tally is kept as events fold, by replacing each node's old state with its new one
// (fleetTally.ts `replace`, which counts only what changed: an acknowledgement moves one latency
// in and at most one out). Whatever the history, the summary must be the one a tally built from
// the final states alone gives (a snapshot restore adds them): same counts, same percentiles.

const digests = ['a', 'b', 'c'].map((c) => c.repeat(64));
const t0 = Date.parse('2026-01-01T00:00:00Z');
const at = fc.integer({ min: 0, max: 4_000_000 }).map((ms) => new Date(t0 + ms).toISOString());
const node = fc.constantFrom('n0', 'n1', 'n2');

type Body = { node: string; type: string; id: string; data: Record<string, unknown> };
const send: fc.Arbitrary<Body> = fc
  .record({ node, digest: fc.constantFrom(...digests), sentAt: at, serial: fc.integer({ min: 1, max: 9 }) })
  .map(({ node, ...d }) => ({
    node,
    type: 'DeclarationSent',
    id: `s-${node}-${d.digest[0]}-${d.sentAt}`,
    data: { node, specDigest: digests[0], declaration: '', signature: '', keyId: 'k', resourceIds: ['web'], ...d },
  }));
const report: fc.Arbitrary<Body> = fc
  .record({ node, declared: fc.option(fc.constantFrom(...digests), { nil: null }), receivedAt: at, id: fc.nat({ max: 30 }) })
  .map(({ node, id, ...d }) => ({
    node,
    type: 'ReportReceived',
    id: `r${id}`,
    data: {
      node,
      applied: ['web'],
      failed: {},
      refused: '',
      carried: [],
      transport: { messageId: null, redelivered: false, userId: null },
      ...d,
    },
  }));
const alive: fc.Arbitrary<Body> = fc
  .record({ node, seenAt: at })
  .map((d) => ({ node: d.node, type: 'AliveSeen', id: `a-${d.seenAt}`, data: d }));

const retired: fc.Arbitrary<Body> = fc
  .record({ node, at })
  .map((d) => ({ node: d.node, type: 'NodeRetired', id: `x-${d.node}-${d.at}`, data: { ...d, reason: '' } }));

/** Bodies as stored events, one position each in order. */
const recorded = (bodies: readonly Body[]): Recorded[] =>
  bodies.map(
    (b, i) =>
      ({ type: b.type, id: b.id, data: b.data, stream: `node-${b.node}`, revision: BigInt(i), position: BigInt(i + 1) }) as Recorded,
  );

/** Folds `events` and holds the tally kept on the way equal to one built from the final states by a restore. */
function assertTallyOfFinalStates(events: readonly Recorded[]): void {
  const live = createReadModel({ now: () => t0 });
  live.apply(events);
  const restored = createReadModel({ now: () => t0 });
  restored.restore([...live.nodes()], live.position());
  assert.deepEqual(live.fleet(t0), restored.fleet(t0));
}

const histories = fc.array(fc.oneof(send, report, report, alive, retired), { maxLength: 150 }).map(recorded);

test('the tally kept as events fold equals the tally of the final states', () => {
  fc.assert(fc.property(histories, assertTallyOfFinalStates), { numRuns: 400 });
});

test('past the kept latencies: many acknowledgements of one node, each moving the oldest out', () => {
  const acks = fc.array(fc.tuple(fc.constantFrom(...digests), at, at), { minLength: 15, maxLength: 45 }).map((pairs) =>
    pairs.flatMap(([digest, sentAt, receivedAt], k): Body[] => [
      {
        node: 'n0',
        type: 'DeclarationSent',
        id: `s${k}`,
        data: {
          node: 'n0',
          digest,
          sentAt,
          serial: k + 1,
          specDigest: digests[0],
          declaration: '',
          signature: '',
          keyId: 'k',
          resourceIds: ['web'],
        },
      },
      {
        node: 'n0',
        type: 'ReportReceived',
        id: `r${k}`,
        data: {
          node: 'n0',
          declared: digest,
          receivedAt,
          applied: ['web'],
          failed: {},
          refused: '',
          carried: [],
          transport: { messageId: null, redelivered: false, userId: null },
        },
      },
    ]),
  );
  fc.assert(
    fc.property(acks, (bodies) => assertTallyOfFinalStates(recorded(bodies))),
    { numRuns: 200 },
  );
});
