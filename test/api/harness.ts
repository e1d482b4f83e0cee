import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/api/index.ts';
import type { ApiDeps } from '../../src/api/index.ts';
import { parseApiTokens } from '../../src/api/index.ts';
import { createMetrics } from '../../src/metrics.ts';
import { createProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import type { ProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import { createMemoryEventStore } from '../../src/store/index.ts';
import type { EventStore } from '../../src/store/index.ts';
import { silentLogger, storeScript } from '../engine/storeScript.ts';

export const readToken = 'reader-token-1';
export const sendToken = 'sender-token-1';
export const read = { authorization: `Bearer ${readToken}` };
export const write = { authorization: `Bearer ${sendToken}` };

export type Harness = Readonly<{
  app: FastifyInstance;
  store: EventStore;
  runner: ProjectionRunner;
  script: ReturnType<typeof storeScript>;
  /** Resolves once the read model has folded everything appended so far. */
  settle: () => Promise<void>;
  close: () => Promise<void>;
}>;

export async function harness(extra: Partial<ApiDeps> = {}): Promise<Harness> {
  const store = createMemoryEventStore();
  const metrics = createMetrics();
  const script = storeScript(store);
  const runner = createProjectionRunner({ store, logger: silentLogger, metrics, now: () => script.now().getTime() });
  await runner.start();
  await runner.caughtUp();
  const { table } = parseApiTokens(`${readToken}:read;${sendToken}:read,send`);
  const app = buildApp({
    readModel: runner.readModel,
    store,
    logger: silentLogger,
    tokens: table,
    projections: runner,
    metrics,
    now: () => script.now().getTime(),
    send: async (node, resources) => script.send(node, resources),
    heartbeatMs: 60_000,
    ...extra,
  });
  await app.ready();
  const settle = async (): Promise<void> => {
    const head = await store.headPosition();
    while (head !== null && (runner.readModel.position() ?? -1n) < head) await new Promise((r) => setImmediate(r));
  };
  return {
    app,
    store,
    runner,
    script,
    settle,
    close: async () => {
      await app.close();
      await runner.stop();
      await store.close();
    },
  };
}
