import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { closeSync, constants, existsSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { pino } from 'pino';
import type { TestContext } from 'node:test';
import type { Server } from '../../src/app/server.ts';
import { createStopSteps } from '../../src/app/stopSteps.ts';
import { streamOf } from '../../src/core/events/index.ts';
import type { Recorded, DeclarationSent } from '../../src/core/events/index.ts';
import { readRollout, startRollout } from '../../src/engine/rolloutCommands.ts';
import type { SignPool } from '../../src/engine/signPool.ts';
import type { EventStore } from '../../src/store/index.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { historyInStore, testKey } from '../support/history.ts';
import { logger } from '../support/logger.ts';
import { oneWaveRollout } from '../support/oneWaveRollout.ts';
import { serveInProcess } from '../support/serveInProcess.ts';
import type { ServeInProcessOptions } from '../support/serveInProcess.ts';
import { tempDir } from '../support/tempDir.ts';
import { until } from '../support/until.ts';

// The steps of serve's stop that waited on work of their own (docs/operations.md#shutting-down):
// the rollout driver's round, and the last snapshot. Each test holds that work far past its own
// deadline (`until`'s 60 s); a stop that waits on it fails.

/** serve on `store`, started, with a signing key and a stop bound of an hour unless the test sets one. */
async function engineOn(t: TestContext, store: EventStore, options: ServeInProcessOptions<'none'> = {}): Promise<Server> {
  const settings = { stopTimeoutMs: '3600000', ...options.settings };
  return (await serveInProcess(t, store, { key: testKey, ...options, settings })).engine;
}

/** The stop, timed by steps, or a failure naming what it was still waiting on once `until`'s deadline passed. */
async function stopped(engine: Server): Promise<readonly string[]> {
  const steps = createStopSteps(logger);
  let done = false;
  const stop = engine.stop(steps).then(() => void (done = true));
  await until('the stop to finish', () => done).catch((err: Error) => {
    throw new Error(`${err.message}; held in its step ${steps.current()?.step ?? '(none)'}`);
  });
  await stop;
  return steps.done().map((s) => s.step);
}

/** A signing thread that takes every batch and never answers: the driver's round is held at its signing. */
function heldSigning(): SignPool & { asked: () => number } {
  let asked = 0;
  return {
    sign: () => {
      asked++;
      return new Promise(() => {});
    },
    usable: () => true,
    ready: () => true,
    start: () => undefined,
    close: async () => undefined,
    asked: () => asked,
  };
}

const nodes = Array.from({ length: 1_200 }, (_, i) => `stop-${i + 1}`);

test("the rollouts step ends the driver's round promptly: a batch held at its signing is given up, and the next start sends it once", async (t) => {
  const store = createMemoryEventStore();
  const pool = heldSigning();
  const first = await engineOn(t, store, { signPool: pool, caughtUp: true });
  const { rollout } = await startRollout(first.rolloutDeps, { ...oneWaveRollout('held-round', nodes, 3_600_000), startedBy: 'test' });
  first.rollouts?.wake();
  await until("the driver's first batch to be signing", () => pool.asked() > 0);
  const steps = await stopped(first);
  assert.ok(steps.includes('rollouts'), steps.join(' '));
  assert.equal((await readRollout(store, rollout))?.sends.size, 0, 'the held batch recorded nothing');

  // The next start resumes the round from the record: every node sent once.
  const second = await engineOn(t, store, { signPool: null });
  await until('the next start to send the whole wave', async () => (await readRollout(store, rollout))?.sends.size === nodes.length);
  await second.stop();
  for (const node of nodes) {
    const sent = (await store.readStream(streamOf(node))).filter((e): e is Recorded<DeclarationSent> => e.type === 'DeclarationSent');
    assert.equal(sent.length, 1, node);
  }
});

test('the snapshot step gives up a write that cannot end within what is left of --stop-timeout-ms; the previous snapshot stays', async (t) => {
  // Before the folder's removal (hooks run in order): the write left behind ends once its pipe is read.
  let release = (): void => {};
  t.after(() => release());
  const path = join(tempDir(t, 'converge-stopsnap-'), 'events.snapshot');
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  await h.report('snap-1');
  const lines: string[] = [];
  const log = pino({ level: 'info' }, { write: (l: string) => void lines.push(l) });
  const engine = await engineOn(t, store, {
    settings: { snapshotPath: path, stopTimeoutMs: '4000' },
    logger: log,
    driveRollouts: false,
    caughtUp: true,
  });
  await engine.runner.writeSnapshot();
  const before = readFileSync(path);
  await h.report('snap-2');
  await until('the new report to be folded', () => engine.runner.readModel.get('snap-2') !== undefined);

  // The next write's temporary file is a pipe nobody reads: opening it never returns, as on a
  // disk that stopped answering.
  const tmp = `${path}.${process.pid}.tmp`;
  execFileSync('mkfifo', [tmp]);
  release = () => closeSync(openSync(tmp, constants.O_RDONLY | constants.O_NONBLOCK));

  const steps = await stopped(engine);
  assert.deepEqual(steps.slice(steps.indexOf('snapshot'), steps.indexOf('snapshot') + 2), ['snapshot', 'projections']);
  assert.ok(
    lines.some((l) => /snapshot given up/.test(l)),
    lines.filter((l) => /snapshot/.test(l)).join(''),
  );
  assert.deepEqual(readFileSync(path), before, 'the previous snapshot is where it was, whole');
  // Once its disk answers, the write left behind ends on its own and removes its temporary file.
  release();
  release = () => undefined;
  await until('the write given up to remove its temporary file', () => !existsSync(tmp));
});
