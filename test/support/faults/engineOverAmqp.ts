import type { Logger } from 'pino';
import type { SigningKey } from '../../../src/core/declaration/index.ts';
import { loadConfig } from '../../../src/app/config.ts';
import { createServer } from '../../../src/app/server.ts';
import type { Server } from '../../../src/app/server.ts';
import { createMetrics } from '../../../src/metrics.ts';
import { createSqliteEventStore } from '../../../src/store/sqlite/sqliteEventStore.ts';
import type { EventStore } from '../../../src/store/index.ts';
import { createAmqpTransport } from '../../../src/transport/amqpTransport.ts';
import type { AmqpTransport } from '../../../src/transport/amqpTransport.ts';

// The whole engine as `converge serve` builds it (createServer: ingest, relay, send, projection
// runner with its snapshot beside the SQLite file, HTTP on an ephemeral port) over a real broker,
// for fault tests that need to stop it two ways: `stop` drains as serve does on SIGTERM; `crash`
// is what a process death leaves — the connection gone with deliveries unacked, nothing
// drained, no snapshot written, the in-memory read model dropped. Only the files remain.

export type EngineOverAmqp = Readonly<{
  engine: Server;
  store: EventStore;
  transport: AmqpTransport;
  stop: () => Promise<void>;
  crash: () => Promise<void>;
}>;

export async function startEngineOverAmqp(options: {
  url: string;
  storePath: string;
  key: SigningKey;
  logger: Logger;
  /** Events between read-model snapshots (serve's default is 10,000 or 10 per node; tests want many, so this one alone). */
  snapshotEvery?: number;
  heartbeatSeconds?: number;
  /** The inbox form (default: the engine's default, classic). */
  inbox?: 'classic' | 'quorum';
}): Promise<EngineOverAmqp> {
  const { logger } = options;
  const config = loadConfig(
    { flags: {}, env: {} },
    {
      store: `sqlite:${options.storePath}`,
      port: '0',
      logLevel: 'silent',
      snapshotEvery: String(options.snapshotEvery ?? 10_000),
      ...(options.snapshotEvery === undefined ? {} : { snapshotPerNode: '0' }),
    },
  );
  const transport = await createAmqpTransport({
    url: options.url,
    logger,
    heartbeatSeconds: options.heartbeatSeconds ?? 2,
    connectionName: 'converge-fault-engine',
    ...(options.inbox === undefined ? {} : { inbox: options.inbox }),
  });
  const store = createSqliteEventStore(options.storePath);
  const engine = createServer({
    config,
    logger,
    store,
    key: options.key,
    metrics: createMetrics(),
    transport: { ingestSource: transport.ingestSource(), publisher: transport.declarationPublisher() },
  });
  try {
    await engine.start();
  } catch (e) {
    await transport.close().catch(() => undefined);
    await store.close().catch(() => undefined);
    throw e;
  }
  let down = false;
  return {
    engine,
    store,
    transport,
    stop: async () => {
      if (down) return;
      down = true;
      await engine.stop();
      await transport.close();
      await store.close();
    },
    crash: async () => {
      if (down) return;
      down = true;
      // The connection first, as a dying process loses it: the broker requeues every unacked
      // delivery and every publish awaiting a confirm fails. Ingest is never asked to drain.
      await transport.close();
      // Stop the subscriptions (they would otherwise keep polling a closed file) without the
      // snapshot a clean stop writes, and the socket.
      await engine.relay?.stop();
      await engine.rollouts?.stop();
      await engine.runner.stop();
      await engine.app.close();
      // A batch ingest still holds finds the store closed and is dropped, unacked.
      await store.close();
    },
  };
}
