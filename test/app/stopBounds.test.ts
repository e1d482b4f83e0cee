import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { TestContext } from 'node:test';
import { loadConfig } from '../../src/app/config.ts';
import { createServer } from '../../src/app/server.ts';
import type { Server, ServerOptions } from '../../src/app/server.ts';
import { createStopSteps } from '../../src/app/stopSteps.ts';
import { streamOf } from '../../src/core/events/index.ts';
import type { Recorded, DeclarationSent } from '../../src/core/events/index.ts';
import { readRollout, startRollout } from '../../src/engine/rolloutCommands.ts';
import type { SignPool } from '../../src/engine/signPool.ts';
import type { EventStore } from '../../src/store/index.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { testKey } from '../support/history.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';

// The steps of serve's stop that waited on work of their own (docs/operations.md#shutting-down):
// the rollout driver's round, and the last snapshot. Each test holds that work far past its own
// deadline (`until`'s 60 s); a stop that waits on it fails.

function engineOn(t: TestContext, store: EventStore, options: Partial<ServerOptions> = {}, env: Record<string, string> = {}): Server {
  const config = loadConfig({ flags: {}, env: {} }, { store: 'memory:', port: '0', logLevel: 'silent', stopTimeoutMs: '3600000', ...env });
  const engine = createServer({ config, logger, store, key: testKey, dashboardDir: null, ...options });
  t.after(() => engine.stop());
  return engine;
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
  t.after(() => store.close());
  const pool = heldSigning();
  const first = engineOn(t, store, { signPool: pool });
  await first.start();
  await first.runner.caughtUp();
  const { rollout } = await startRollout(first.rolloutDeps, {
    rollout: 'held-round',
    resources: [{ id: 'web', image: 'nginx:1.27' }],
    selection: { kind: 'nodes', nodes },
    waves: '100%',
    maxFailures: '0',
    waveTimeoutMs: 3_600_000,
    startedBy: 'test',
  });
  first.rollouts?.wake();
  await until("the driver's first batch to be signing", () => pool.asked() > 0);
  const steps = await stopped(first);
  assert.ok(steps.includes('rollouts'), steps.join(' '));
  assert.equal((await readRollout(store, rollout))?.sends.size, 0, 'the held batch recorded nothing');

  // The next start resumes the round from the record: every node sent once.
  const second = engineOn(t, store, { signPool: null });
  await second.start();
  await until('the next start to send the whole wave', async () => (await readRollout(store, rollout))?.sends.size === nodes.length);
  await second.stop();
  for (const node of nodes) {
    const sent = (await store.readStream(streamOf(node))).filter((e): e is Recorded<DeclarationSent> => e.type === 'DeclarationSent');
    assert.equal(sent.length, 1, node);
  }
});
