import type { Logger } from 'pino';
import { connectAmqp } from '../transport/amqpConnection.ts';
import type { AmqpConnection } from '../transport/amqpConnection.ts';
import { createAmqpDeclarationPublisher } from '../transport/amqpDeclarationPublisher.ts';
import { createAmqpIngestSource } from '../transport/amqpIngestSource.ts';
import { meshTopology } from '../transport/topology.ts';
import type { EngineTransport } from './engine.ts';

// The engine's two transport ports over one recovering RabbitMQ connection, for `serve` and
// `demo --amqp`. Connecting asserts DESIGN §1's topology, so a conflicting broker fails the start.

export type AmqpEngineTransport = Readonly<{ connection: AmqpConnection; transport: EngineTransport; close: () => Promise<void> }>;

export async function connectEngineTransport(url: string, logger: Logger, connectionName = 'converge-engine'): Promise<AmqpEngineTransport> {
  const connection = await connectAmqp({ url, logger, topology: meshTopology(), connectionName });
  const transport: EngineTransport = {
    ingestSource: createAmqpIngestSource(connection, { logger }),
    publisher: createAmqpDeclarationPublisher(connection, { logger }),
  };
  return {
    connection,
    transport,
    close: async () => {
      await transport.publisher.close();
      await connection.close();
    },
  };
}
