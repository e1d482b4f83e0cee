import assert from 'node:assert/strict';
import { test } from 'node:test';
import { waveProgress } from '../../src/core/rollout/index.ts';
import type { WaveProgress } from '../../src/core/rollout/index.ts';
import { createProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import type { ProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { historyInStore } from '../support/history.ts';
import { logger } from '../support/logger.ts';
import { rolloutInStore } from '../support/rolloutInStore.ts';
import { until } from '../support/until.ts';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// The read side's live view of a rollout, kept as the read model folds: per wave,
// how its nodes stand (the node fold compared with the digest the rollout sent), latencies, ETA.

async function setup() {
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  const runner = createProjectionRunner({ store, logger, now: () => h.now().getTime() });
  await runner.start();
  const settle = async (): Promise<void> => {
    const head = await store.headPosition();
    if (head !== null) await until('the fold to reach the head', () => (runner.readModel.position() ?? -1n) >= head, { everyMs: 0 });
  };
  return { store, h, runner, settle, close: async () => (await runner.stop(), await store.close()) };
}

const counts = (p: WaveProgress | null) =>
  p === null
    ? null
    : {
        wave: p.wave,
        unsent: [...p.unsent],
        unsentCount: p.unsentCount,
        pending: p.pending,
        done: p.done,
        superseded: p.superseded,
        failures: [...p.failures],
        failureCount: p.failureCount,
        failuresByClass: p.failuresByClass,
        late: p.late(Date.parse('2026-11-30T15:00:00Z')),
        supersededNodes: [...p.supersededNodes()],
      };

/** The view's incremental progress equals projections' waveProgress computed from scratch over the read model. */
function assertMatchesReference(runner: ProjectionRunner, id: string): void {
  const s = runner.rollouts.get(id);
  assert.ok(s);
  assert.deepEqual(counts(runner.rollouts.progress(id)), counts(waveProgress(s, s.current, (n) => runner.readModel.get(n))));
  const summary = runner.rollouts.summary(id, Date.now());
  assert.ok(summary);
  for (const w of summary.waves) {
    const ref = waveProgress(s, w.wave, (n) => runner.readModel.get(n));
    if (ref === null) {
      assert.equal(w.unsent, w.size, `wave ${w.wave} not started: every node unsent`);
      continue;
    }
    assert.deepEqual(
      { unsent: w.unsent, pending: w.pending, done: w.done, failed: w.failed, superseded: w.superseded },
      { unsent: ref.unsentCount, pending: ref.pending, done: ref.done, failed: ref.failureCount, superseded: ref.superseded },
      `wave ${w.wave}`,
    );
  }
}

test('a stale report leaves the node pending in the view; the matching one makes it done, with its latency', async () => {
  const t = await setup();
  try {
    const before = await t.h.send('slow', [{ id: 'web', image: 'nginx:1.26' }]);
    const r = rolloutInStore(t.store, t.h, 'r1', ['slow', 'fast'], { waves: '1,100%' });
    await r.start();
    assert.deepEqual(await r.run(), ['startWave', 'send', 'wait(1 node(s) of wave 1 still behind)']);
    t.h.tick(300);
    await t.h.report('slow', { applied: ['web'], declared: before.digest });
    await t.settle();
    let s = t.runner.rollouts.summary('r1', t.h.now().getTime());
    assert.equal(s?.status, 'running');
    assert.deepEqual(
      s?.waves.map((w) => [w.wave, w.unsent, w.pending, w.done]),
      [
        [1, 0, 1, 0],
        [2, 1, 0, 0],
      ],
      'the stale report completes nothing',
    );
    assertMatchesReference(t.runner, 'r1');

    t.h.tick(200);
    await t.h.report('slow', { applied: ['web'], declared: await r.digestSentTo('slow') });
    await t.settle();
    s = t.runner.rollouts.summary('r1', t.h.now().getTime());
    assert.deepEqual(s?.waves[0] && [s.waves[0].pending, s.waves[0].done], [0, 1]);
    assert.deepEqual(s?.convergence, { samples: 1, p50Ms: 500, p99Ms: 500 });
    assertMatchesReference(t.runner, 'r1');

    // The next wave: sent, so the ETA is the rate so far (1 node settled in 500 ms) times what is left.
    assert.deepEqual(await r.run(), ['completeWave', 'startWave', 'send', 'wait(1 node(s) of wave 2 still behind)']);
    await t.settle();
    s = t.runner.rollouts.summary('r1', t.h.now().getTime());
    assert.equal(s?.current, 2);
    assert.deepEqual(s?.eta.remaining, 1);
    assert.equal(s?.eta.ms, 500);
    t.h.tick(100);
    await t.h.report('fast', { applied: ['web'], declared: await r.digestSentTo('fast') });
    assert.deepEqual(await r.run(), ['completeWave', 'complete', 'wait(completed)']);
    await t.settle();
    s = t.runner.rollouts.summary('r1', t.h.now().getTime());
    assert.equal(s?.status, 'completed');
    assert.deepEqual(s?.totals, { unsent: 0, pending: 0, done: 2, failed: 0, superseded: 0 });
    assert.deepEqual(s?.eta, { remaining: 0, ms: null, at: null });
    assert.deepEqual(
      s?.waves.map((w) => w.recorded),
      [
        { done: 1, failed: 0, superseded: 0 },
        { done: 1, failed: 0, superseded: 0 },
      ],
    );
    assert.equal(s?.convergence.samples, 2);
  } finally {
    await t.close();
  }
});

test('refused, degraded, unsendable and superseded nodes are counted per wave, with their details, and the budget used', async () => {
  const t = await setup();
  try {
    const nodes = ['a', 'b', 'c', 'd', 'e'];
    const r = rolloutInStore(t.store, t.h, 'r2', nodes, { waves: '100%', maxFailures: '3' });
    await r.start();
    await r.apply(await r.decide()); // the wave starts
    await r.skip(1, 'e');
    assert.deepEqual(await r.run(), ['send', 'wait(4 node(s) of wave 1 still behind)']);
    await t.h.report('a', { refused: 'no room', declared: await r.digestSentTo('a') });
    await t.h.report('b', { failed: { web: 'pull failed' }, declared: await r.digestSentTo('b') });
    const newer = await t.h.send('c', [{ id: 'db' }]);
    await t.h.report('c', { applied: ['db'], declared: newer.digest });
    await t.settle();
    const s = t.runner.rollouts.summary('r2', t.h.now().getTime());
    assert.deepEqual(
      s?.waves.map((w) => ({
        pending: w.pending,
        refused: w.refused,
        degraded: w.degraded,
        unsendable: w.unsendable,
        superseded: w.superseded,
      })),
      [{ pending: 1, refused: 1, degraded: 1, unsendable: 1, superseded: 1 }],
    );
    // The superseded node spends the budget too (onSuperseded defaults to fail).
    assert.deepEqual(s?.budget, { used: 4, max: 3 });
    assertMatchesReference(t.runner, 'r2');
    const page = t.runner.rollouts.nodes('r2', { limit: 10 });
    assert.deepEqual(
      page?.nodes.map((n) => [n.node, n.outcome, n.detail]),
      [
        ['a', 'refused', 'refused: no room'],
        ['b', 'degraded', 'failed web (pull failed)'],
        ['c', 'superseded', 'behind: the latest report names ' + newer.digest.slice(0, 12) + ' (matching)'],
        ['d', 'pending', 'no report since the send'],
        ['e', 'unsendable', 'CONVERGE_ERR_PORT_CARRIED: port 8080 is carried'],
      ],
    );
    const failed = t.runner.rollouts.nodes('r2', { outcome: 'refused', limit: 10 });
    assert.deepEqual([failed?.total, failed?.nodes.map((n) => n.node)], [1, ['a']]);
    const first = t.runner.rollouts.nodes('r2', { limit: 2 });
    assert.deepEqual([first?.nodes.map((n) => n.node), first?.next, first?.total], [['a', 'b'], 1, 5]);
    const second = t.runner.rollouts.nodes('r2', { limit: 3, after: 1 });
    assert.deepEqual([second?.nodes.map((n) => n.node), second?.next], [['c', 'd', 'e'], null]);
  } finally {
    await t.close();
  }
});

test('random rollouts: the incremental view equals waveProgress from scratch after every step', async () => {
  let seed = 14;
  const rnd = (n: number): number => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % n;
  };
  for (let round = 0; round < 6; round++) {
    const t = await setup();
    try {
      const nodes = Array.from({ length: 3 + rnd(6) }, (_, i) => `n${round}-${i}`);
      // Some nodes were sent something before, so their late reports are stale.
      const earlier = new Map<string, string>();
      for (const n of nodes) if (rnd(2) === 0) earlier.set(n, (await t.h.send(n, [{ id: 'old' }])).digest);
      const r = rolloutInStore(t.store, t.h, `rr${round}`, nodes, { waves: '1,50%,100%', maxFailures: String(rnd(3)), pauseMs: 0 });
      await r.start();
      for (let step = 0; step < 30; step++) {
        await r.run();
        const s = await r.state();
        if (s.status !== 'running') break;
        const sent = [...s.sends.keys()];
        const n = sent[rnd(sent.length)];
        if (n !== undefined) {
          t.h.tick(10 + rnd(500));
          const digest = s.sends.get(n)!.digest;
          switch (rnd(6)) {
            case 0:
              if (earlier.has(n)) await t.h.report(n, { applied: ['old'], declared: earlier.get(n)! });
              break;
            case 1:
              await t.h.report(n, { refused: 'no', declared: digest });
              break;
            case 2:
              await t.h.report(n, { failed: { web: 'x' }, declared: digest });
              break;
            case 3:
              await t.h.send(n, [{ id: 'other' }]);
              break;
            default:
              await t.h.report(n, { applied: ['web'], declared: digest });
          }
        }
        await t.settle();
        assertMatchesReference(t.runner, `rr${round}`);
      }
    } finally {
      await t.close();
    }
  }
});

test('after a snapshot restore the rollouts are folded from their streams, and the view equals the live one', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'converge-rollouts-'));
  const store: EventStore = createMemoryEventStore();
  const h = historyInStore(store);
  const snapshot = { path: join(dir, 'snap.json'), everyEvents: 1_000_000 };
  try {
    const live = createProjectionRunner({ store, logger, snapshot });
    await live.start();
    const r = rolloutInStore(store, h, 'r3', ['a', 'b'], { waves: '100%' });
    await r.start();
    await r.run();
    await h.report('a', { applied: ['web'], declared: await r.digestSentTo('a') });
    const head = await store.headPosition();
    await until('folded', () => live.readModel.position() === head);
    await live.writeSnapshot();
    await live.stop();
    await h.report('b', { refused: 'no', declared: await r.digestSentTo('b') });
    const head2 = await store.headPosition();

    const restored = createProjectionRunner({ store, logger, snapshot });
    await restored.start();
    await until('restored and folded', () => restored.readModel.position() === head2);
    const fresh = createProjectionRunner({ store, logger });
    await fresh.start();
    await until('fresh folded', () => fresh.readModel.position() === head2);
    const a = restored.rollouts.summary('r3', 0);
    const b = fresh.rollouts.summary('r3', 0);
    assert.ok(a && b);
    assert.deepEqual({ ...a, position: null }, { ...b, position: null });
    assert.deepEqual(a.waves[0] && [a.waves[0].done, a.waves[0].refused], [1, 1]);
    await restored.stop();
    await fresh.stop();
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await store.close();
  }
});

test("a stale report from a pending node is a change of its rollout (the page's node list shows why it is not done), an alive is not", async () => {
  const t = await setup();
  try {
    const before = await t.h.send('slow', [{ id: 'web', image: 'nginx:1.26' }]);
    const r = rolloutInStore(t.store, t.h, 'r1', ['slow'], { waves: '1,100%' });
    await r.start();
    await r.run();
    await t.settle();
    const changes: bigint[] = [];
    const off = t.runner.rollouts.onChange((c) => void (c.rollout === 'r1' && changes.push(c.position)));
    t.h.tick(100);
    await t.h.alive('slow');
    await t.settle();
    assert.deepEqual(changes, [], 'an alive changes nothing a rollout shows');
    t.h.tick(300);
    await t.h.report('slow', { applied: ['web'], declared: before.digest });
    await t.settle();
    assert.equal(t.runner.rollouts.nodes('r1', { wave: 1, limit: 10 })?.nodes[0]?.outcome, 'pending');
    assert.equal(changes.length, 1, 'the stale report is announced once');
    off();
  } finally {
    await t.close();
  }
});
