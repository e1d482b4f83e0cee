import type { Logger } from 'pino';
import { createIngest } from '../../../src/engine/ingest/index.ts';
import type { Ingest } from '../../../src/engine/ingest/index.ts';
import type { EventStore } from '../../../src/store/port.ts';
import { connectAmqp } from '../../../src/transport/amqpConnection.ts';
import type { AmqpConnection } from '../../../src/transport/amqpConnection.ts';
import { createAmqpIngestSource } from '../../../src/transport/amqpIngestSource.ts';
import { meshTopology } from '../../../src/transport/topology.ts';

// The engine's ingest path alone (AMQP → store), wired from the transport's own pieces, for the
// fault scenarios and the SIGKILL child: the part of the engine that must lose nothing.

export type IngestOverAmqp = Readonly<{ connection: AmqpConnection; ingest: Ingest; stop: () => Promise<void> }>;

export async function startIngestOverAmqp(options: {
  url: string;
  store: EventStore;
  logger: Logger;
  heartbeatSeconds?: number;
  connectionName?: string;
}): Promise<IngestOverAmqp> {
  const { logger, store } = options;
  const connection = await connectAmqp({
    url: options.url,
    logger,
    topology: meshTopology(),
    connectionName: options.connectionName ?? 'converge-fault-ingest',
    heartbeatSeconds: options.heartbeatSeconds ?? 2,
  });
  // Short store backoff so recovery times measure the fault, not a long sleep after it.
  const ingest = createIngest({ store, source: createAmqpIngestSource(connection, { logger }), logger, retry: { minMs: 50, maxMs: 1000 } });
  await ingest.start();
  return {
    connection,
    ingest,
    stop: async () => {
      await ingest.stop();
      await connection.close();
    },
  };
}
