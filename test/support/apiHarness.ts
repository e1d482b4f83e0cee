import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/api/index.ts';
import type { ApiDeps } from '../../src/api/index.ts';
import { parseApiTokens } from '../../src/api/index.ts';
import { rolloutCommandsOn } from '../../src/app/apiDeps.ts';
import { validateSpec } from '../../src/core/declaration/index.ts';
import { createMetrics } from '../../src/metrics.ts';
import type { Metrics } from '../../src/metrics.ts';
import { createProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import type { ProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { historyInStore } from './history.ts';
import type { StoreHistory } from './history.ts';
import { logger } from './logger.ts';
import { until } from './until.ts';

// The HTTP API over a memory store and a live projection runner, driven through app.inject()
// (no socket); a scripted history appends to the store and `settle` waits for the fold.

export const readToken = 'reader-token-1';
export const sendToken = 'sender-token-1';
export const read = { authorization: `Bearer ${readToken}` };
export const write = { authorization: `Bearer ${sendToken}` };

export type ApiHarness = Readonly<{
  app: FastifyInstance;
  store: EventStore;
  runner: ProjectionRunner;
  metrics: Metrics;
  history: StoreHistory;
  /** Resolves once the read model has folded everything appended so far. */
  settle: () => Promise<void>;
  close: () => Promise<void>;
}>;

export async function apiHarness(extra: Partial<ApiDeps> = {}): Promise<ApiHarness> {
  const store = createMemoryEventStore();
  const metrics = createMetrics();
  const history = historyInStore(store);
  const runner = createProjectionRunner({ store, logger, metrics, now: () => history.now().getTime() });
  await runner.start();
  await runner.caughtUp();
  const { table } = parseApiTokens(`${readToken}:read;${sendToken}:read,send`);
  const app = buildApp({
    readModel: runner.readModel,
    store,
    logger,
    tokens: table,
    projections: runner,
    metrics,
    now: () => history.now().getTime(),
    // Validated as the real sender (src/engine/sendBatch.ts) validates every spec it is given.
    send: async (node, resources) => history.send(node, validateSpec({ resources }).resources),
    rollouts: runner.rollouts,
    rolloutCommands: rolloutCommandsOn({ store, now: () => history.now(), nodeStates: () => runner.readModel.nodes() }),
    heartbeatMs: 60_000,
    ...extra,
  });
  await app.ready();
  const settle = async (): Promise<void> => {
    const head = await store.headPosition();
    if (head !== null)
      await until('the read model to fold the store head', () => (runner.readModel.position() ?? -1n) >= head, { everyMs: 0 });
  };
  return {
    app,
    store,
    runner,
    metrics,
    history,
    settle,
    close: async () => {
      await app.close();
      await runner.stop();
      await store.close();
    },
  };
}
