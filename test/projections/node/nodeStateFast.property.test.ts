import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { createNodeDraft } from '../../../projections/node/nodeDraft.ts';
import { foldIntoDraft } from '../../../projections/node/nodeStateFast.ts';
import { draftOf, publishDraft } from '../../../projections/node/publishDraft.ts';
import { foldNode, foldNodeEvents, initialNodeState, recentLatencyLimit, sendHistoryLimit } from '../../../projections/index.ts';
import type { NodeState } from '../../../projections/index.ts';
import type { Recorded } from '../../../src/core/events/index.ts';

// The draft fold (projections/node/nodeStateFast.ts) is the replay's fast path: it must give exactly what
// the reference fold (foldNode) gives, for any history — published at the end, at any checkpoint
// on the way, or continued from a published state. Events are built directly (no signing), so the
// histories reach what the engine's constructors never write: duplicate report ids, a digest sent
// twice, positions out of order, times of other shapes and equal instants in other text, rollout
// events in the middle, more sends and acknowledgements than the bounded histories keep.

const digests = ['a', 'b', 'c', 'd', 'e', 'f'].map((c) => c.repeat(64));
const times = [
  '2026-01-01T00:00:00.000Z',
  '2026-01-01T00:00:01.500Z',
  '2026-01-01T00:00:01.500Z',
  '2026-01-01T00:01:00.000Z',
  '2026-01-01T00:00:01Z', // another shape (Date.parse), an instant the others hold too
  '2026-01-01T01:00:01.500+01:00', // the 00:00:01.500Z instant again
  '2025-12-31T23:59:59.999Z',
  '2026-01-02T00:00:00.000Z',
];
const ids = ['web', 'db', 'cache'];

const time = fc.constantFrom(...times);
const digest = fc.constantFrom(...digests);
const idList = fc.subarray(ids);
type Body = Pick<Recorded, 'type' | 'data' | 'id'>;

const send: fc.Arbitrary<Body> = fc
  .record({
    digest,
    specDigest: fc.constantFrom(digests[0]!, digests[1]!),
    serial: fc.integer({ min: 1, max: 20 }),
    resourceIds: idList,
    sentAt: time,
    id: fc.string({ maxLength: 3 }),
  })
  .map(({ id, ...d }) => ({
    type: 'DeclarationSent',
    id: `s-${id}`,
    data: { node: 'n1', declaration: 'AA==', signature: 'AA==', keyId: 'k', ...d },
  }));

const report: fc.Arbitrary<Body> = fc
  .record({
    id: fc.constantFrom('r1', 'r2', 'r3', 'r4', 'r5', 'r6', 'r7', 'r8'),
    declared: fc.option(digest, { nil: null }),
    applied: idList,
    failed: fc.dictionary(fc.constantFrom(...ids, '__proto__'), fc.constantFrom('broke', 'disk full'), { maxKeys: 2 }),
    refused: fc.constantFrom('', '', 'no'),
    carried: fc.array(fc.integer({ min: 1, max: 65535 }), { maxLength: 2 }),
    receivedAt: time,
    // What ingest recorded of a digest older than the kept history: absent (older events), none, a send.
    sentEarlier: fc.constantFrom(undefined, null, { serial: 3, sentAt: times[0]! }),
  })
  .map(({ id, sentEarlier, ...d }) => ({
    type: 'ReportReceived',
    id,
    data: {
      node: 'n1',
      ...d,
      transport: { messageId: id, redelivered: false, userId: 'n1' },
      ...(sentEarlier === undefined ? {} : { sentEarlier }),
    },
  }));

const alive: fc.Arbitrary<Body> = time.map((seenAt) => ({ type: 'AliveSeen', id: `a-${seenAt}`, data: { node: 'n1', seenAt } }));
const heard: fc.Arbitrary<Body> = fc
  .tuple(time, fc.option(time))
  .map(([at, before]) => ({ type: 'NodeHeard', id: `h-${at}`, data: { node: 'n1', at, lastSeenBefore: before } }));
const silent: fc.Arbitrary<Body> = fc.tuple(time, time).map(([lastSeenAt, observedAt]) => ({
  type: 'NodeSilent',
  id: `s-${lastSeenAt}`,
  data: { node: 'n1', lastSeenAt, observedAt, graceMs: 6000 },
}));
const retired: fc.Arbitrary<Body> = fc
  .tuple(time, fc.constantFrom('', 'decommissioned'))
  .map(([at, reason]) => ({ type: 'NodeRetired', id: `r-${at}`, data: { node: 'n1', at, reason } }));
const rollout: fc.Arbitrary<Body> = fc.constant({
  type: 'RolloutStarted',
  id: 'ro',
  data: {},
} as unknown as Body);

/** A history: events with positions and revisions that mostly climb, sometimes repeat or step back. */
const histories: fc.Arbitrary<Recorded[]> = fc
  .array(
    fc.tuple(
      fc.oneof(
        { arbitrary: send, weight: 3 },
        { arbitrary: report, weight: 4 },
        { arbitrary: alive, weight: 3 },
        { arbitrary: heard, weight: 1 },
        { arbitrary: silent, weight: 1 },
        { arbitrary: retired, weight: 1 },
        { arbitrary: rollout, weight: 1 },
      ),
      fc.integer({ min: -2, max: 5 }),
      fc.integer({ min: -1, max: 2 }),
    ),
    { maxLength: 80 },
  )
  .map((steps) => {
    let position = 0n;
    let revision = -1n;
    return steps.map(([body, dp, dr]) => {
      position += BigInt(dp);
      revision += BigInt(dr);
      return { ...body, stream: 'node-n1', position, revision } as Recorded;
    });
  });

function drafted(events: readonly Recorded[], from?: NodeState): NodeState {
  const d = from === undefined ? createNodeDraft('n1') : draftOf(from);
  for (const e of events) foldIntoDraft(d, e);
  return publishDraft(d);
}

test('the draft fold publishes what foldNode folds, for any history', () => {
  fc.assert(
    fc.property(histories, (events) => {
      assert.deepEqual(drafted(events), foldNodeEvents('n1', events));
    }),
    { numRuns: 1500 },
  );
});

test('publishing at every step (a checkpoint) gives each state foldNode gives, and changes nothing after', () => {
  fc.assert(
    fc.property(histories, (events) => {
      const d = createNodeDraft('n1');
      let reference = initialNodeState('n1');
      assert.deepEqual(publishDraft(d), reference);
      for (const e of events) {
        foldIntoDraft(d, e);
        reference = foldNode(reference, e);
        assert.deepEqual(publishDraft(d), reference);
      }
    }),
    { numRuns: 500 },
  );
});

test('a draft continued from a folded state equals the fold of the whole history', () => {
  fc.assert(
    fc.property(histories, fc.nat(), (events, cut) => {
      const i = events.length === 0 ? 0 : cut % (events.length + 1);
      const first = foldNodeEvents('n1', events.slice(0, i));
      assert.deepEqual(drafted(events.slice(i), first), foldNodeEvents('n1', events));
    }),
    { numRuns: 800 },
  );
});

test('past the bounds: more sends and acknowledgements than the state keeps', () => {
  const events: Recorded[] = [];
  let p = 0n;
  const at = (k: number): string => new Date(Date.UTC(2026, 0, 1) + k * 1000).toISOString();
  for (let k = 0; k < (sendHistoryLimit + recentLatencyLimit) * 2; k++) {
    const digest = k.toString(16).padStart(64, '0');
    events.push({
      type: 'DeclarationSent',
      id: `s${k}`,
      data: {
        node: 'n1',
        serial: k + 1,
        digest,
        specDigest: digest,
        declaration: '',
        signature: '',
        keyId: 'k',
        resourceIds: ['web'],
        sentAt: at(k),
      },
      stream: 'node-n1',
      revision: p,
      position: ++p,
    } as Recorded);
    if (k % 3 !== 0)
      events.push({
        type: 'ReportReceived',
        id: `r${k}`,
        data: {
          node: 'n1',
          declared: (k % 5 === 0 ? k - 2 : k).toString(16).padStart(64, '0'),
          applied: ['web'],
          failed: {},
          refused: '',
          carried: [],
          receivedAt: at(k + 0.25),
          transport: { messageId: null, redelivered: false, userId: null },
        },
        stream: 'node-n1',
        revision: p,
        position: ++p,
      } as Recorded);
  }
  const reference = foldNodeEvents('n1', events);
  assert.equal(reference.earlierSends.length, sendHistoryLimit - 1);
  assert.equal(reference.convergence.recentLatenciesMs.length, recentLatencyLimit);
  assert.deepEqual(drafted(events), reference);
});
