import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import pino from 'pino';
import type { Recorded } from '../../src/core/events/index.ts';
import { createFleetHistory } from '../../src/readModel/fleetHistory.ts';
import { createProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import { createReadModel } from '../../src/readModel/readModel.ts';
import type { ReadModel } from '../../src/readModel/readModel.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { history, historyInStore } from '../support/history.ts';
import { readModelAnswers } from '../support/readModelAnswers.ts';

// A cold start's bulk catch-up (ReadModel.catchUp, the draft fold published once at the end) must
// leave the read model exactly as folding the same events one by one through `apply` does: every
// node's state, the slots' order, the position, the fleet tally, the liveness counts, a page.
// Histories over a few nodes reach duplicate report ids, digests sent twice, alives out of order
// and rollout events (where the bulk fold stops and `apply` goes on), cut into arbitrary batches.

const digests = ['a', 'b', 'c', 'd'].map((c) => c.repeat(64));
const times = [
  '2026-01-01T00:00:00.000Z',
  '2026-01-01T00:00:01.500Z',
  '2026-01-01T00:01:00.000Z',
  '2026-01-01T00:00:01Z',
  '2025-12-31T23:59:59.999Z',
  '2026-01-02T00:00:00.000Z',
];
const ids = ['web', 'db'];
const nodes = ['n1', 'n2', 'n3'];
type Body = Pick<Recorded, 'type' | 'data' | 'id'> & { node: string };

const node = fc.constantFrom(...nodes);
const time = fc.constantFrom(...times);
const digest = fc.constantFrom(...digests);

const send: fc.Arbitrary<Body> = fc
  .record({ node, digest, specDigest: digest, serial: fc.integer({ min: 1, max: 9 }), resourceIds: fc.subarray(ids), sentAt: time })
  .map((d) => ({
    type: 'DeclarationSent',
    id: `s-${d.node}-${d.serial}`,
    node: d.node,
    data: { declaration: 'AA==', signature: 'AA==', keyId: 'k', ...d },
  }));
const report: fc.Arbitrary<Body> = fc
  .record({
    node,
    id: fc.constantFrom('r1', 'r2', 'r3', 'r4'),
    declared: fc.option(digest, { nil: null }),
    applied: fc.subarray(ids),
    failed: fc.dictionary(fc.constantFrom(...ids), fc.constant('broke'), { maxKeys: 1 }),
    refused: fc.constantFrom('', 'no'),
    carried: fc.array(fc.integer({ min: 1, max: 9 }), { maxLength: 1 }),
    receivedAt: time,
  })
  .map(({ id, ...d }) => ({
    type: 'ReportReceived',
    id: `${d.node}-${id}`,
    node: d.node,
    data: { ...d, transport: { messageId: id, redelivered: false, userId: d.node } },
  }));
const alive: fc.Arbitrary<Body> = fc
  .tuple(node, time)
  .map(([n, seenAt]) => ({ type: 'AliveSeen', id: `a-${n}-${seenAt}`, node: n, data: { node: n, seenAt } }));
const retired: fc.Arbitrary<Body> = fc
  .tuple(node, time)
  .map(([n, at]) => ({ type: 'NodeRetired', id: `r-${n}-${at}`, node: n, data: { node: n, at, reason: '' } }));
const rollout: fc.Arbitrary<Body> = fc.constant({ type: 'RolloutStarted', id: 'ro', node: '', data: {} } as unknown as Body);
// An audit checkpoint (docs/audit.md#checkpoints-and-witnesses): no fold reads it, so the bulk fold goes past it.
const checkpoint: fc.Arbitrary<Body> = fc
  .nat({ max: 60 })
  .map((size) => ({ type: 'AuditCheckpointed', id: `cp-${size}`, node: '', data: { size } }) as unknown as Body);

const histories = (withRollouts: boolean): fc.Arbitrary<Recorded[]> =>
  fc
    .array(
      fc.oneof(
        { arbitrary: send, weight: 3 },
        { arbitrary: report, weight: 4 },
        { arbitrary: alive, weight: 3 },
        { arbitrary: retired, weight: 1 },
        { arbitrary: rollout, weight: withRollouts ? 1 : 0 },
        { arbitrary: checkpoint, weight: 1 },
      ),
      { maxLength: 60 },
    )
    .map((bodies) => {
      const revisions = new Map<string, bigint>();
      return bodies.map(({ node: n, ...b }, i) => {
        const stream = b.type === 'RolloutStarted' ? 'rollout-ro' : b.type === 'AuditCheckpointed' ? 'audit' : `node-${n}`;
        const revision = (revisions.get(stream) ?? -1n) + 1n;
        revisions.set(stream, revision);
        return { ...b, stream, revision, position: BigInt(i + 1) } as Recorded;
      });
    });

/** `events` cut before each index in `cuts`. */
const batches = (events: readonly Recorded[], cuts: readonly number[]): Recorded[][] => {
  const at = [...new Set(cuts.map((c) => c % (events.length + 1)))].sort((a, b) => a - b);
  const out: Recorded[][] = [];
  let from = 0;
  for (const c of [...at, events.length]) {
    if (c > from) out.push(events.slice(from, c));
    from = Math.max(from, c);
  }
  return out;
};

const now = Date.parse('2026-01-01T00:00:30Z');

/** What a cold start does: bulk while it can, then `apply` from where the bulk stopped. */
function caughtUp(bs: readonly Recorded[][], until: bigint): ReadModel {
  const m = createReadModel({ now: () => now });
  let k = 0;
  while (k < bs.length && m.catchUp(bs[k]!, until)) k++;
  m.endCatchUp();
  for (const b of bs) m.apply(b);
  return m;
}

test('a bulk catch-up leaves the read model as folding event by event does, wherever the batches are cut', () => {
  fc.assert(
    fc.property(histories(true), fc.array(fc.nat(), { maxLength: 6 }), fc.nat(), (events, cuts, u) => {
      const bs = batches(events, cuts);
      const reference = createReadModel({ now: () => now });
      for (const b of bs) reference.apply(b);
      const until = BigInt(u % (events.length + 2));
      assert.deepEqual(readModelAnswers(caughtUp(bs, until), now), readModelAnswers(reference, now));
    }),
    { numRuns: 400 },
  );
});

test('the bulk fold stops at the first rollout event (not at an audit checkpoint) and past `until`; what it folded is published by endCatchUp alone', () => {
  fc.assert(
    fc.property(histories(true), (events) => {
      const m = createReadModel({ now: () => now });
      const until = BigInt(Math.floor(events.length / 2));
      m.catchUp(events, until);
      assert.equal(m.size(), 0, 'nothing is shown before endCatchUp');
      assert.equal(m.position(), null);
      m.endCatchUp();
      const stop = events.findIndex((e) => e.position > until || e.stream.startsWith('rollout-'));
      const reference = createReadModel({ now: () => now });
      reference.apply(stop < 0 ? events : events.slice(0, stop));
      assert.deepEqual(readModelAnswers(m, now), readModelAnswers(reference, now));
    }),
    { numRuns: 200 },
  );
});

test('a listener that needs every change keeps the bulk fold from starting; one added during it sees the model published first', () => {
  const h = history('c1');
  const sent = h.send();
  const events = [sent, h.alive(), h.report({ declared: sent.data.digest }), h.alive()];
  const blocked = createReadModel();
  blocked.onChange(() => {});
  assert.equal(blocked.catchUp(events, 100n), false);
  assert.equal(blocked.position(), null, 'nothing folded in bulk');

  const m = createReadModel();
  const heard: string[] = [];
  m.onChange((c) => heard.push(`bulk listener: ${c.position}`), { bulk: () => heard.push('bulk') });
  assert.equal(m.catchUp(events.slice(0, 2), 100n), true);
  m.onChange((c) => heard.push(`every change: ${c.position}`));
  assert.equal(m.position(), events[1]!.position, 'published before the new listener was added');
  assert.equal(m.get('c1')?.sent?.digest, sent.data.digest);
  assert.equal(m.catchUp(events.slice(2), 100n), false, 'no more bulk with such a listener');
  m.endCatchUp();
  m.apply(events.slice(2));
  assert.deepEqual(heard, ['bulk', ...events.slice(2).flatMap((e) => [`bulk listener: ${e.position}`, `every change: ${e.position}`])]);
  const reference = createReadModel();
  reference.apply(events);
  assert.deepEqual([...m.nodes()], [...reference.nodes()]);
});

test('a draft fold that throws drops the whole catch-up: apply meets the event again and stops there', () => {
  const h = history('c2');
  const first = h.send();
  const broken = { ...h.report(), data: null } as unknown as Recorded;
  const m = createReadModel();
  assert.equal(m.catchUp([first, broken, h.alive()], 100n), false);
  m.endCatchUp();
  assert.equal(m.position(), null, 'nothing published');
  assert.throws(() => m.apply([first, broken]), /CONVERGE_ERR_PROJECTION_FAILED|the fold failed/);
  assert.equal(m.position(), first.position);
  assert.equal(m.failure()?.position, broken.position);
});

test('a cold start through the projection runner: same model, same fleet as of any position, and a snapshot it can write', async () => {
  const store = createMemoryEventStore();
  const steps = historyInStore(store);
  for (let i = 0; i < 30; i++) {
    const n = `p${i % 7}`;
    await steps.send(n);
    await steps.alive(n);
    if (i % 3 !== 0) await steps.report(n, { declared: steps.digests(n).at(-1)! });
    if (i % 5 === 0) await steps.report(n, { declared: steps.digests(n)[0]! });
  }
  const logger = pino({ level: 'silent' });
  const run = async (catchUp: 'bulk' | 'per-event') => {
    const runner = createProjectionRunner({ store, logger, catchUp, now: () => now });
    const fleet = createFleetHistory({ store, readModel: runner.readModel });
    await runner.start();
    await runner.caughtUp();
    const head = (await store.headPosition())!;
    const asOf = [];
    for (const p of [1n, head / 3n, head / 2n, head]) asOf.push(await fleet.at({ kind: 'position', position: p }));
    await runner.stop();
    return { model: readModelAnswers(runner.readModel, now), asOf, rollouts: runner.rollouts.list() };
  };
  assert.deepEqual(await run('bulk'), await run('per-event'));
});
