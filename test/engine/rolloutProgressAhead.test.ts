import assert from 'node:assert/strict';
import { test } from 'node:test';
import { waveProgress } from '../../src/core/rollout/index.ts';
import type { RolloutState, WaveProgress } from '../../src/core/rollout/index.ts';
import type { Recorded, RolloutEvent } from '../../src/core/events/index.ts';
import { rolloutStreamOf } from '../../src/core/events/index.ts';
import { progressAhead, unsentOf } from '../../src/engine/rolloutProgressAhead.ts';
import { createReadModel } from '../../src/readModel/readModel.ts';
import { createRolloutView } from '../../src/readModel/rollouts.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { historyInStore } from '../support/history.ts';
import { rolloutInStore } from '../support/rolloutInStore.ts';

// The driver's count of the open wave while the read side's view lags its latest sends: the
// view's counts as folded plus the RolloutSent events since must equal waveProgress, the count
// from scratch over the wave, on the same read model.

const at = Date.parse('2026-11-29T15:00:00Z');
const counts = (p: WaveProgress | null | undefined) => {
  if (p === null || p === undefined) return p;
  const late = p.late(at);
  return {
    wave: p.wave,
    unsentCount: p.unsentCount,
    pending: p.pending,
    done: p.done,
    superseded: p.superseded,
    skipped: p.skipped,
    failureCount: p.failureCount,
    failuresByClass: p.failuresByClass,
    late: { timeout: late.timeout, silent: late.silent, nodes: late.failures.map((f) => f.node).sort() },
  };
};

async function world(nodes: readonly string[], waves = '100%') {
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  const readModel = createReadModel({ now: () => at });
  const view = createRolloutView(readModel);
  let folded: bigint | null = null;
  /** Fold the store into the read model up to `upTo` (the head when not given). */
  const fold = async (upTo?: bigint): Promise<void> => {
    const events: Recorded[] = [];
    for await (const batch of store.readAll({ after: folded }))
      for (const e of batch) if (upTo === undefined || e.position <= upTo) events.push(e);
    readModel.apply(events);
    if (events.length > 0) folded = events[events.length - 1]!.position;
  };
  const r = rolloutInStore(store, h, 'r1', nodes, { waves });
  await r.start();
  await r.apply(await r.decide());
  return { store, h, readModel, view, fold, r };
}

const logOf = async (store: EventStore): Promise<Recorded<RolloutEvent>[]> =>
  (await store.readStream(rolloutStreamOf('r1'))) as Recorded<RolloutEvent>[];

const ahead = async (w: Awaited<ReturnType<typeof world>>, s: RolloutState) =>
  progressAhead(s, s.current, w.view.progressFolded('r1')!, await logOf(w.store), (n) => w.readModel.get(n), 60_000, 1_000);

test('sends the view has not folded count as pending: equal to waveProgress from scratch', async () => {
  const nodes = Array.from({ length: 12 }, (_, i) => `n${String(i).padStart(2, '0')}`);
  const w = await world(nodes);
  await w.r.apply({ kind: 'send', wave: 1, nodes: nodes.slice(0, 4) });
  await w.h.report('n00', { applied: ['web'], declared: await w.r.digestSentTo('n00') });
  await w.h.report('n01', { refused: 'no room', declared: await w.r.digestSentTo('n01') });
  await w.fold();
  // Driver's sends the view has not folded: one batch whole, then part of a second's declarations.
  const head1 = (await w.store.headPosition())!;
  await w.r.apply({ kind: 'send', wave: 1, nodes: nodes.slice(4, 7) });
  await w.r.skip(1, 'n07', 'held', 'held by ops');
  await w.r.apply({ kind: 'send', wave: 1, nodes: nodes.slice(8, 10) });
  for (const upTo of [head1, head1 + 2n]) {
    await w.fold(upTo);
    const s = await w.r.state();
    assert.ok(w.view.progressFolded('r1')!.revision < s.revision, 'the view lags the driver');
    const got = await ahead(w, s);
    assert.ok(got !== undefined);
    assert.deepEqual(counts(got), counts(waveProgress(s, s.current, (n) => w.readModel.get(n))));
  }
});

test('a wave opened since the view folded counts from nothing plus the sends since', async () => {
  const nodes = Array.from({ length: 8 }, (_, i) => `w${i}`);
  const w = await world(nodes, '2,100%');
  await w.r.apply({ kind: 'send', wave: 1, nodes: nodes.slice(0, 2) });
  for (const n of nodes.slice(0, 2)) await w.h.report(n, { applied: ['web'], declared: await w.r.digestSentTo(n) });
  await w.fold();
  // The driver completes wave 1, opens wave 2 and sends two batches of it, the view behind each step.
  const positions: bigint[] = [];
  for (const d of ['completeWave', 'startWave'] as const) {
    const decided = await w.r.decide();
    assert.equal(decided.kind, d);
    await w.r.apply(decided);
    positions.push((await w.store.headPosition())!);
  }
  await w.r.apply({ kind: 'send', wave: 2, nodes: nodes.slice(2, 5) });
  positions.push((await w.store.headPosition())!);
  await w.r.apply({ kind: 'send', wave: 2, nodes: nodes.slice(5, 7) });
  const s = await w.r.state();
  assert.equal(s.current, 2);
  const fromScratch = counts(waveProgress(s, 2, (n) => w.readModel.get(n)));
  for (const upTo of positions) {
    await w.fold(upTo);
    assert.ok(w.view.progressFolded('r1')!.revision < s.revision, 'the view lags the driver');
    assert.deepEqual(counts(await ahead(w, s)), fromScratch, `view folded to ${upTo}`);
  }
});

test('a refused send in the gap, or a gap the log does not cover, is counted from scratch', async () => {
  const nodes = ['a', 'b', 'c', 'd'];
  const w = await world(nodes);
  await w.r.apply({ kind: 'send', wave: 1, nodes: ['a'] });
  await w.fold();
  await w.r.skip(1, 'b');
  const s = await w.r.state();
  assert.equal(await ahead(w, s), undefined);
  const log = (await logOf(w.store)).slice(0, -1);
  assert.equal(
    progressAhead(s, 1, w.view.progressFolded('r1')!, log, (n) => w.readModel.get(n), 60_000, 1_000),
    undefined,
  );
});

test('unsentOf resumes where it left off and lists what waveProgress lists', async () => {
  const nodes = Array.from({ length: 9 }, (_, i) => `u${i}`);
  const w = await world(nodes);
  const cursor = { wave: 0, index: 0 };
  for (const batch of [['u0', 'u1'], ['u3'], ['u2', 'u4', 'u5']]) {
    await w.r.apply({ kind: 'send', wave: 1, nodes: batch });
    const s = await w.r.state();
    const ref = waveProgress(s, 1, (n) => w.readModel.get(n))!;
    assert.deepEqual(unsentOf(s, 1, cursor, 1_000), ref.unsent);
    assert.deepEqual(unsentOf(s, 1, cursor, 2), ref.unsent.slice(0, 2));
  }
  assert.equal(cursor.index, 6, 'every node before the cursor was sent');
});
