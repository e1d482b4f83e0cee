import assert from 'node:assert/strict';
import { test } from 'node:test';
import { abortRollout, pauseRollout, resumeRollout } from '../../src/engine/rolloutCommands.ts';
import { createRolloutDriver, rolloutDriverCheckpoint } from '../../src/engine/rolloutDriver.ts';
import type { RolloutDriver, RolloutDriverOptions } from '../../src/engine/rolloutDriver.ts';
import { createBatchSender } from '../../src/engine/sendBatch.ts';
import { makeDeclarationSent, makeRolloutEvent, rolloutStreamOf, streamOf } from '../../src/core/events/index.ts';
import type { RolloutHaltedData, WaveCompletedData } from '../../src/core/events/index.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { testKey } from '../support/history.ts';
import { logger } from '../support/logger.ts';
import { rolloutFleet } from '../support/rolloutFleet.ts';
import type { RolloutFleet } from '../support/rolloutFleet.ts';
import { until } from '../support/until.ts';

// The driver over a store, a live read model and a scripted fleet. It opens a
// wave only when every node of the one before has reported the digest this rollout sent it.

const nodes = (n: number, prefix = 'n'): string[] => Array.from({ length: n }, (_, i) => `${prefix}${i + 1}`);

/** A driver over `store` with no read model and no rollout to drive, going round as fast as it can. */
const idleDriver = (store: EventStore, options: Partial<RolloutDriverOptions> = {}): RolloutDriver =>
  createRolloutDriver({
    store,
    key: testKey,
    logger,
    nodeOf: () => undefined,
    readModelPosition: () => null,
    pollMs: 1,
    minIntervalMs: 0,
    ...options,
  });

test("the seed's race inside a rollout: a slow node's late report about its previous declaration does not complete the wave", async () => {
  const f = await rolloutFleet({ behaviour: { slow: 'silent' } });
  try {
    // Before the rollout the slow node was sent D0 and has not answered yet.
    const d0 = makeDeclarationSent({
      node: 'slow',
      serial: 1,
      resources: [{ id: 'web', image: 'nginx:1.26' }],
      key: testKey,
      now: f.now(),
    });
    await f.store.append([{ stream: streamOf('slow'), expected: 'no_stream', events: [d0] }]);
    f.tick(1_000);
    const id = await f.start({ rollout: 'race', selection: { kind: 'nodes', nodes: ['slow', 'b', 'c'] }, waves: '1,100%' });
    await until('the rollout to send wave 1', async () => (await f.rollout(id)).sends.has('slow'));
    const ours = (await f.rollout(id)).sends.get('slow')!;
    const sentAtMs = Date.parse(ours.sentAt);

    // Then D0's report lands, after the rollout's send: converged, every resource applied.
    f.tick(2_000);
    await f.report('slow', { declared: d0.data.digest, applied: ['web'] });
    await f.settle();

    const s = await f.rollout(id);
    assert.equal(s.waves[0]?.completed, null, 'wave 1 is not complete: the latest report names D0, not our digest');
    assert.equal(s.current, 1);
    assert.equal(s.sends.has('b'), false, 'wave 2 was not opened');
    const slow = f.runner.readModel.get('slow')!;
    assert.equal(slow.reported?.class, 'stale');
    assert.equal(slow.status, 'behind');
    // The counterexample: the clock rule ("a report received after the send means caught up")
    // would have counted this node done and opened wave 2 on words it had not read.
    const clockRuleDone = slow.reported !== null && Date.parse(slow.reported.receivedAt) > sentAtMs && slow.reported.refused === '';
    assert.equal(clockRuleDone, true, 'the clock rule would have completed the wave');

    // The matching report completes the wave, and the rollout goes on to the end.
    f.behave('slow', 'apply');
    await f.report('slow', { declared: ours.digest, applied: ['web', 'sidecar'] });
    await until('the rollout to complete', async () => (await f.rollout(id)).status === 'completed');
    const done = await f.rollout(id);
    assert.deepEqual(
      done.waves.map((w) => w.completed?.done),
      [1, 2],
    );
    assert.deepEqual(done.completed && { done: done.completed.done, failed: done.completed.failed }, { done: 3, failed: 0 });
    for (const n of ['slow', 'b', 'c']) {
      const tagged = (await f.sentTo(n)).filter((e) => e.data.rollout?.id === id);
      assert.equal(tagged.length, 1, `${n} got exactly one declaration from the rollout`);
    }
  } finally {
    await f.stop();
  }
});

test('failure budget: a refusing node is within a budget of 1, a degraded one two waves later exceeds it and halts there', async () => {
  const f = await rolloutFleet({ behaviour: { n2: 'refuse', n5: 'degrade' } });
  try {
    const id = await f.start({ rollout: 'budget', selection: { kind: 'nodes', nodes: nodes(8) }, waves: '2,4,6,100%', maxFailures: '1' });
    await until('the rollout to halt', async () => (await f.rollout(id)).status === 'halted');
    const s = await f.rollout(id);
    const completed = s.waves.map((w) => w.completed).filter((w): w is WaveCompletedData => w !== null);
    assert.deepEqual(
      completed.map((w) => [w.wave, w.done, w.failed]),
      [
        [1, 1, 1],
        [2, 2, 0],
      ],
    );
    assert.deepEqual(completed[0]?.failures, [{ node: 'n2', reason: 'refused', detail: 'refused: policy: not on this host' }]);
    const halted = s.halted as RolloutHaltedData;
    assert.equal(halted.wave, 3);
    assert.equal(halted.failures, 2);
    assert.equal(halted.maxFailures, 1);
    assert.deepEqual(
      halted.failed.map((x) => [x.node, x.reason]),
      [['n5', 'degraded']],
    );
    assert.match(halted.failed[0]!.detail, /failed web \(image pull failed\)/);
    // Nothing of wave 4 was sent, then or later.
    await f.settle();
    assert.deepEqual([...s.sends.keys()].sort(), nodes(6));
    assert.equal((await f.sentTo('n7')).length, 0);
  } finally {
    await f.stop();
  }
});

test('with no budget the refusing canary halts the rollout in wave 1', async () => {
  const f = await rolloutFleet({ behaviour: { n1: 'refuse' } });
  try {
    const id = await f.start({ rollout: 'canary', selection: { kind: 'nodes', nodes: nodes(4) }, waves: '1,100%', maxFailures: '0' });
    await until('the rollout to halt', async () => (await f.rollout(id)).status === 'halted');
    const s = await f.rollout(id);
    assert.equal(s.halted?.wave, 1);
    assert.deepEqual([...s.sends.keys()], ['n1']);
  } finally {
    await f.stop();
  }
});

test('a lone canary superseded by a stray send halts the rollout in wave 1: wave 2 never opens to the fleet', async () => {
  const f = await rolloutFleet({ behaviour: { n1: 'silent' } });
  try {
    const id = await f.start({ rollout: 'stray', selection: { kind: 'nodes', nodes: nodes(50) }, waves: '1,100%', maxFailures: '0' });
    await until('the canary sent to', async () => (await f.rollout(id)).sends.size === 1);
    // Another declaration reaches the canary from elsewhere, and it converges on that one.
    const [ours] = await f.sentTo('n1');
    const stray = makeDeclarationSent({ node: 'n1', serial: ours!.data.serial + 1, resources: [{ id: 'db' }], key: testKey, now: f.now() });
    await f.store.append([{ stream: streamOf('n1'), expected: ours!.revision, events: [stray] }]);
    await f.report('n1', { applied: ['db'], declared: stray.data.digest });
    await until('the rollout to end', async () => (await f.rollout(id)).status !== 'running');
    await f.settle();
    const s = await f.rollout(id);
    assert.equal(s.status, 'halted');
    assert.deepEqual([s.current, s.waves[0]?.completed ?? null], [1, null], 'wave 1 did not complete and wave 2 did not open');
    assert.deepEqual(
      s.halted?.failed.map((x) => [x.node, x.reason]),
      [['n1', 'superseded']],
    );
    assert.equal((await f.sentTo('n2')).length, 0);
  } finally {
    await f.stop();
  }
});

test('a node behind past the wave timeout counts against the budget; the timeout waits while paused', async () => {
  const f = await rolloutFleet({ behaviour: { n2: 'silent' } });
  try {
    const id = await f.start({
      rollout: 'late',
      selection: { kind: 'nodes', nodes: nodes(4) },
      waves: '2,100%',
      maxFailures: '1',
      waveTimeoutMs: 30_000,
    });
    await until('wave 1 sent', async () => (await f.rollout(id)).sends.size === 2);
    f.tick(20_000);
    await pauseRollout({ store: f.store, now: f.now }, id, { by: 'op', reason: 'look' });
    f.tick(60_000); // paused: the timeout does not run
    await resumeRollout({ store: f.store, now: f.now }, id, { by: 'op' });
    await f.settle();
    assert.equal((await f.rollout(id)).waves[0]?.completed, null, '20 s of the 30 s timeout have run');
    f.tick(10_001);
    await until('wave 1 to complete on its timeout', async () => (await f.rollout(id)).waves[0]?.completed !== null);
    const w1 = (await f.rollout(id)).waves[0]!.completed!;
    assert.deepEqual([w1.done, w1.failed], [1, 1]);
    // n2 never answers and is never heard from: a silent node, by the node fold's liveness.
    assert.equal(w1.failures[0]?.reason, 'silent');
    assert.match(w1.failures[0]!.detail, /^silent: /);
    assert.deepEqual(w1.byClass, { silent: 1 });
    await until('the rollout to complete', async () => (await f.rollout(id)).status === 'completed');
  } finally {
    await f.stop();
  }
});

test('paused, the driver sends nothing; aborted, it never sends again', async () => {
  const f = await rolloutFleet({ behaviour: { n1: 'silent' } });
  try {
    const deps = { store: f.store, now: f.now };
    const id = await f.start({ rollout: 'pa', selection: { kind: 'nodes', nodes: nodes(5) }, waves: '1,100%' });
    await until('wave 1 sent', async () => (await f.rollout(id)).sends.size === 1);
    await pauseRollout(deps, id, { by: 'op', reason: 'hold' });
    await f.report('n1', { declared: (await f.rollout(id)).sends.get('n1')!.digest, applied: ['web', 'sidecar'] });
    await f.settle();
    assert.equal((await f.rollout(id)).waves[0]?.completed, null, 'paused: the wave is not even closed');
    await abortRollout(deps, id, { by: 'op', reason: 'wrong image' });
    await f.settle();
    const s = await f.rollout(id);
    assert.equal(s.status, 'aborted');
    assert.equal(s.sends.size, 1);
    assert.equal(f.driver.running().length, 0);
  } finally {
    await f.stop();
  }
});

test('a node carrying a port the spec assigns is unsendable: recorded as skipped, counted as a failure, never sent', async () => {
  const f = await rolloutFleet();
  try {
    await f.report('n2', { carried: [8080] });
    const id = await f.start({
      rollout: 'ports',
      selection: { kind: 'nodes', nodes: nodes(3) },
      resources: [{ id: 'web', image: 'nginx', ports: [8080] }],
      maxFailures: '1',
    });
    await until('the rollout to complete', async () => (await f.rollout(id)).status === 'completed');
    const s = await f.rollout(id);
    assert.equal(s.skipped.get('n2')?.code, 'CONVERGE_ERR_PORT_CARRIED');
    assert.equal(s.completed?.failed, 1);
    assert.equal((await f.sentTo('n2')).length, 0);
  } finally {
    await f.stop();
  }
});

test('a driver stopped mid-rollout and a new one on the same store finish it, each node sent to once', async () => {
  const store = createMemoryEventStore();
  const first = await rolloutFleet({ store, behaviour: Object.fromEntries(nodes(30).map((n) => [n, 'silent' as const])) });
  const id = await first.start({ rollout: 'restart', selection: { kind: 'nodes', nodes: nodes(30) }, waves: '10,100%' });
  await until('wave 1 sent', async () => (await first.rollout(id)).sends.size === 10);
  await first.stop();
  const second = await rolloutFleet({ store });
  try {
    // The silent nodes of wave 1 answer now; the new driver finds the rollout and goes on.
    for (const [node, send] of (await second.rollout(id)).sends)
      await second.report(node, { declared: send.digest, applied: ['web', 'sidecar'] });
    await until('the rollout to complete', async () => (await second.rollout(id)).status === 'completed');
    for (const n of nodes(30)) assert.equal((await second.sentTo(n)).length, 1, n);
    assert.equal((await second.rollout(id)).completed?.done, 30);
  } finally {
    await second.stop();
  }
});

test('two drivers at once on one store (no lease to stop them) still record every decision once', async () => {
  const f = await rolloutFleet({ driver: { batchSize: 7 } });
  const other = createRolloutDriver({
    store: f.store,
    key: testKey,
    logger,
    now: f.now,
    nodeOf: (n) => f.runner.readModel.get(n),
    readModelPosition: () => f.runner.readModel.position(),
    pollMs: 3,
    minIntervalMs: 0,
    batchSize: 5,
  });
  other.start();
  try {
    const id = await f.start({ rollout: 'twice', selection: { kind: 'nodes', nodes: nodes(60) }, waves: '1,10%,50%,100%' });
    await until('the rollout to complete', async () => (await f.rollout(id)).status === 'completed');
    await f.settle();
    const types = (await f.events(id)).map((e) => e.type);
    for (const t of ['WaveStarted', 'WaveCompleted'] as const) assert.equal(types.filter((x) => x === t).length, 4, t);
    assert.equal(types.filter((x) => x === 'RolloutCompleted').length, 1);
    for (const n of nodes(60)) assert.equal((await f.sentTo(n)).length, 1, n);
    assert.equal((await f.rollout(id)).completed?.done, 60);
  } finally {
    await other.stop();
    await f.stop();
  }
});

test('two drivers sending one wave in batches of different sizes at one revision: the loser writes nothing, so no send goes unlisted', async () => {
  const f = await rolloutFleet({ drive: false });
  try {
    const id = await f.start({ rollout: 'split', selection: { kind: 'nodes', nodes: nodes(7) } });
    const wave1 = makeRolloutEvent('WaveStarted', { rollout: id, wave: 1, from: 0, to: 7, startedAt: f.now().toISOString() });
    await f.store.append([{ stream: rolloutStreamOf(id), expected: 'stream_exists', events: [wave1] }]);
    const s = await f.rollout(id);
    // Both decided "send" on the same fold; B lists five nodes, A seven.
    const sendBatch = (batch: readonly string[]) =>
      createBatchSender({ store: f.store, key: testKey, now: f.now }).sendMany(
        batch.map((node) => ({ node, resources: s.started.resources })),
        {
          rollout: { id, wave: 1 },
          extra: (sent) => [
            {
              stream: rolloutStreamOf(id),
              expected: s.revision,
              events: [
                makeRolloutEvent(
                  'RolloutSent',
                  { rollout: id, wave: 1, sends: [...sent], skipped: [], sentAt: f.now().toISOString() },
                  { revision: s.revision },
                ),
              ],
            },
          ],
        },
      );
    await sendBatch(nodes(5));
    await assert.rejects(sendBatch(nodes(7)), /append to rollout-split: expected revision/);
    assert.equal((await f.sentTo('n6')).length, 0, 'n6 was not sent outside a RolloutSent');
    const after = await f.rollout(id);
    assert.deepEqual([...after.sends.keys()], nodes(5));
  } finally {
    await f.stop();
  }
});

test('an idle driver going round after round leaves no abort listener behind (no MaxListenersExceededWarning)', async () => {
  const warnings: string[] = [];
  const onWarning = (w: Error): void => void warnings.push(`${w.name}: ${w.message}`);
  process.on('warning', onWarning);
  const driver = idleDriver(createMemoryEventStore());
  driver.start();
  try {
    for (let i = 0; i < 25; i++) await driver.nextRound();
    await new Promise((resolve) => setTimeout(resolve, 100)); // the warning is emitted asynchronously
    assert.deepEqual(
      warnings.filter((w) => w.startsWith('MaxListenersExceededWarning')),
      [],
    );
  } finally {
    process.off('warning', onWarning);
    await driver.stop();
  }
});

test("the driver takes a wave's progress from the read side's counts when they stand where its fold does, else counts the wave", async () => {
  let fleet: RolloutFleet | undefined;
  const answered = { byView: 0, byWalk: 0 };
  const f = (fleet = await rolloutFleet({
    driver: {
      progress: (s) => {
        const p = fleet!.runner.rollouts.progressAt(s);
        answered[p === undefined ? 'byWalk' : 'byView']++;
        return p;
      },
    },
  }));
  try {
    const id = await f.start({ rollout: 'counted', selection: { kind: 'nodes', nodes: nodes(40) }, waves: '1,25%,100%' });
    await until('the rollout to complete', async () => {
      await f.settle();
      return (await f.rollout(id)).status === 'completed';
    });
    const s = await f.rollout(id);
    assert.deepEqual(
      s.waves.map((w) => w.completed?.done),
      [1, 9, 30],
    );
    assert.ok(answered.byView > 0, `the view answered ${answered.byView} rounds, the walk ${answered.byWalk}`);
    // The store says completed as soon as the driver appends the last event; the read side folds it
    // on its own subscription, later. Wait until it has folded everything stored before asking it
    // about the store's fold (the view is called from the read model's apply, before it returns).
    const head = await f.store.headPosition();
    await until('the read side to fold everything stored', () => head !== null && (f.runner.readModel.position() ?? -1n) >= head);
    // A fold the view does not stand at (a decision it has not folded yet) is not answered from it.
    assert.notEqual(f.runner.rollouts.progressAt(s), undefined);
    assert.equal(f.runner.rollouts.progressAt({ ...s, revision: s.revision - 1n }), undefined);
  } finally {
    await f.stop();
  }
});

test('a driver whose store fails a read as it starts drives again after a pause, rather than stopping for good', async () => {
  // On a store with no lease (SQLite, memory) a throw out of the driver's loop used to end it:
  // the engine served on while no rollout ever moved again.
  const store = createMemoryEventStore();
  const getCheckpoint = store.getCheckpoint.bind(store);
  let failures = 1;
  store.getCheckpoint = async (name) => {
    if (name === rolloutDriverCheckpoint && failures-- > 0) throw new Error('store away');
    return getCheckpoint(name);
  };
  const driver = idleDriver(store);
  driver.start();
  try {
    await driver.nextRound();
    assert.equal(failures, -1, 'the checkpoint was read again after the failure');
  } finally {
    await driver.stop();
  }
});

test('with no rollout running, the driver saves how far it followed once per checkpoint interval and on stop, not every round', async () => {
  // A round per node change saved the checkpoint every 20 ms of a report flood, one
  // synchronous store write (an fsync on SQLite) each time, on the ingest's thread.
  const store = createMemoryEventStore();
  const saved: bigint[] = [];
  const setCheckpoint = store.setCheckpoint.bind(store);
  store.setCheckpoint = async (name, position) => {
    if (name === rolloutDriverCheckpoint) saved.push(position);
    await setCheckpoint(name, position);
  };
  let t = Date.parse('2026-11-30T12:00:00Z');
  const driver = idleDriver(store, { now: () => new Date(t), monotonic: () => t, checkpointEveryMs: 5_000 });
  const declare = async (i: number): Promise<void> => {
    const e = makeDeclarationSent({ node: `n${i}`, serial: 1, resources: [{ id: 'web' }], key: testKey, now: new Date(t) });
    await store.append([{ stream: streamOf(`n${i}`), expected: 'no_stream', events: [e] }]);
  };
  driver.start();
  try {
    for (let i = 0; i < 20; i++) {
      await declare(i);
      await driver.nextRound();
      await driver.nextRound();
      t += 100;
    }
    assert.ok(saved.length <= 1, `saved ${saved.length} times in 2 s of rounds`);
    t += 5_000;
    await driver.nextRound();
    await driver.nextRound();
    assert.equal(saved.at(-1), await store.headPosition(), 'saved once the interval passed');
    const before = saved.length;
    await declare(20);
    await driver.nextRound();
    await driver.nextRound();
    assert.equal(saved.length, before);
  } finally {
    await driver.stop();
  }
  assert.equal(await store.getCheckpoint(rolloutDriverCheckpoint), await store.headPosition(), 'stop saves the last position followed');
});
