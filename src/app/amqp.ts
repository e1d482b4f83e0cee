import type { Logger } from 'pino';
import type { AmqpConnection } from '../transport/amqpConnection.ts';
import { createAmqpTransport } from '../transport/amqpTransport.ts';
import type { AmqpTransportOptions } from '../transport/amqpTransport.ts';
import type { ServerTransport } from './server.ts';

// The engine's two transport ports over one recovering RabbitMQ connection, for `serve` and
// `demo --amqp`: createAmqpTransport connects and asserts DESIGN §1's topology (a conflicting
// broker fails the start); this only shapes it as the engine's port.

export type AmqpServerTransport = Readonly<{ connection: AmqpConnection; transport: ServerTransport; close: () => Promise<void> }>;

export async function connectServerTransport(
  url: string,
  logger: Logger,
  connectionName = 'converge-engine',
  options: Omit<AmqpTransportOptions, 'url' | 'logger' | 'connectionName'> = {},
): Promise<AmqpServerTransport> {
  const amqp = await createAmqpTransport({ ...options, url, logger, connectionName });
  const transport: ServerTransport = { ingestSource: amqp.ingestSource(), publisher: amqp.declarationPublisher() };
  return {
    connection: amqp.connection,
    transport,
    close: async () => {
      await transport.publisher.close();
      await amqp.close();
    },
  };
}
