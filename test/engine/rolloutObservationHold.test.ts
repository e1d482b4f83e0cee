import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createRolloutDriver } from '../../src/engine/rolloutDriver.ts';
import type { RolloutDriverOptions } from '../../src/engine/rolloutDriver.ts';
import { pauseRollout, resumeRollout } from '../../src/engine/rolloutCommands.ts';
import { makeDeclarationSent, streamOf } from '../../src/core/events/index.ts';
import { testKey } from '../support/history.ts';
import { logger } from '../support/logger.ts';
import { rolloutFleet } from '../support/rolloutFleet.ts';
import type { RolloutFleet } from '../support/rolloutFleet.ts';

// docs/design.md §8 "Timeouts while not observed": while the engine hears no node (its ingest lost the broker),
// no report can arrive, so a wave's timeout is not decided; once it observes again it waits a
// grace for the reports queued meanwhile, then decides on what arrived. The "observing" switch
// is the driver's `observedSince`, moved by the test on the fleet's controlled clocks.

const graceMs = 5_000;
const waveTimeoutMs = 10_000;

type World = Readonly<{
  f: RolloutFleet;
  /** Advance the wall and the monotonic clock together. */
  tick: (ms: number) => void;
  cut: () => void;
  heal: () => void;
  driverOptions: Partial<RolloutDriverOptions>;
}>;

async function world(behaviour: Record<string, 'silent' | 'apply' | 'refuse'> = { n1: 'silent' }): Promise<World> {
  let mono = 0;
  /** Since when (monotonic) the engine has observed without a break; null: cut off. */
  let since: number | null = 0;
  const driverOptions: Partial<RolloutDriverOptions> = { graceMs, monotonic: () => mono, observedSince: () => since };
  const f = await rolloutFleet({ behaviour, driver: driverOptions });
  return {
    f,
    tick: (ms) => {
      f.tick(ms);
      mono += ms;
    },
    cut: () => void (since = null),
    heal: () => void (since = mono),
    driverOptions,
  };
}

const start = (f: RolloutFleet): Promise<string> =>
  f.start({ rollout: 'cut', selection: { kind: 'nodes', nodes: ['n1'] }, waves: '100%', maxFailures: '0', waveTimeoutMs });

test('a wave whose timeout falls inside a cut is not decided until a grace after observation resumes, then on what arrived', async () => {
  const { f, tick, cut, heal } = await world();
  try {
    const id = await start(f);
    await f.settle();
    const sent = (await f.rollout(id)).sends.get('n1');
    assert.ok(sent !== undefined, 'n1 sent its declaration');

    cut();
    tick(waveTimeoutMs * 3);
    await f.settle();
    assert.equal((await f.rollout(id)).status, 'running', 'no timeout decided while nothing can be heard');

    heal();
    tick(graceMs - 1);
    await f.settle();
    assert.equal((await f.rollout(id)).status, 'running', 'reports queued during the cut may still be arriving');

    // The report the node sent during the cut, consumed after the resume.
    await f.report('n1', { declared: sent.digest, applied: ['web', 'sidecar'] });
    await f.settle();
    const s = await f.rollout(id);
    assert.equal(s.status, 'completed');
    assert.deepEqual([s.completed?.done, s.completed?.failed], [1, 0]);
  } finally {
    await f.stop();
  }
});

test('a node still behind a grace after the resume times out then, and its failure says the timeout was held', async () => {
  const { f, tick, cut, heal } = await world();
  try {
    const id = await start(f);
    await f.settle();
    cut();
    tick(waveTimeoutMs * 3);
    heal();
    await f.settle();
    assert.equal((await f.rollout(id)).status, 'running');
    tick(graceMs);
    await f.settle();
    const s = await f.rollout(id);
    assert.equal(s.status, 'halted', 'decided once a grace was observed');
    const failure = s.halted?.failed[0];
    assert.equal(failure?.node, 'n1');
    assert.match(failure?.detail ?? '', /held/);
  } finally {
    await f.stop();
  }
});

test('a rollout paused and resumed during the cut: its timeout, paused time added, is still held to a grace after the cut', async () => {
  const { f, tick, cut, heal } = await world();
  try {
    const id = await start(f);
    await f.settle();
    const deps = { store: f.store, now: f.now };
    cut();
    tick(waveTimeoutMs / 2);
    await pauseRollout(deps, id, { by: 'test', reason: 'outage' });
    tick(1_000);
    await resumeRollout(deps, id, { by: 'test' });
    f.driver.wake();
    // Past the timeout with the paused second added, still cut off.
    tick(waveTimeoutMs / 2 + 1_000);
    await f.settle();
    assert.equal((await f.rollout(id)).status, 'running', 'held through the cut');
    heal();
    tick(graceMs - 1);
    await f.settle();
    assert.equal((await f.rollout(id)).status, 'running', 'held to a grace after the cut');
    tick(1);
    await f.settle();
    assert.equal((await f.rollout(id)).status, 'halted');
  } finally {
    await f.stop();
  }
});

test("a rollback's timeout is held too, while a refusal seen during the cut still halts the rollout at once", async () => {
  const { f, tick, cut, heal } = await world({ n1: 'refuse', n2: 'silent' });
  try {
    // Each had a spec before, which the rollback sends back.
    for (const node of ['n1', 'n2']) {
      const e = makeDeclarationSent({ node, serial: 1, resources: [{ id: 'old' }], key: testKey, now: f.now() });
      await f.store.append([{ stream: streamOf(node), expected: 'no_stream', events: [e] }]);
    }
    cut();
    const id = await f.start({
      rollout: 'back',
      selection: { kind: 'nodes', nodes: ['n1', 'n2'] },
      waves: '100%',
      maxFailures: '0',
      waveTimeoutMs,
      rollbackOnHalt: 'wave',
    });
    await f.settle();
    const s = await f.rollout(id);
    assert.equal(s.halted?.why, 'overBudget', 'a refusal is an answer: no timeout in it');
    assert.equal(s.status, 'rollingBack');
    tick(waveTimeoutMs * 3);
    await f.settle();
    assert.equal((await f.rollout(id)).status, 'rollingBack', "the rollback's timeout held through the cut");
    heal();
    tick(graceMs);
    await f.settle();
    const done = await f.rollout(id);
    assert.equal(done.status, 'rolledBack');
    const n2 = done.rollback?.completed?.failures.find((x) => x.node === 'n2');
    assert.match(n2?.detail ?? '', /timeout held/);
  } finally {
    await f.stop();
  }
});

test('a restart: the wave timed out while no engine ran, and the new driver waits a grace after its own start', async () => {
  const { f, tick, driverOptions } = await world();
  let mono = 0;
  let since: number | null = null;
  const next = createRolloutDriver({
    store: f.store,
    key: testKey,
    logger,
    now: f.now,
    nodeOf: (n) => f.runner.readModel.get(n),
    progress: (s) => f.runner.rollouts.progressAt(s),
    readModelPosition: () => f.runner.readModel.position(),
    pollMs: 10,
    minIntervalMs: 1,
    ...driverOptions,
    monotonic: () => mono,
    observedSince: () => since,
  });
  try {
    const id = await start(f);
    await f.settle();
    await f.driver.stop();
    // Down for three timeouts; the new process's clock starts anew.
    tick(waveTimeoutMs * 3);
    next.start();
    await next.nextRound();
    since = mono;
    await next.nextRound();
    await next.nextRound();
    assert.equal((await f.rollout(id)).status, 'running', 'the queue of reports on the broker is consumed first');
    f.tick(graceMs);
    mono += graceMs;
    await next.nextRound();
    await next.nextRound();
    assert.equal((await f.rollout(id)).status, 'halted');
  } finally {
    await next.stop();
    await f.stop();
  }
});
