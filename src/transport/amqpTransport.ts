import type { Logger } from 'pino';
import { createAmqpDeclarationPublisher } from './amqpDeclarationPublisher.ts';
import { connectAmqp } from './amqpConnection.ts';
import type { AmqpConnection } from './amqpConnection.ts';
import { createAmqpIngestSource } from './amqpIngestSource.ts';
import type { AmqpIngestSourceOptions } from './amqpIngestSource.ts';
import { meshTopology } from './topology.ts';
import type { InboxKind } from './topology.ts';
import type { DeclarationPublisher, IngestSource } from './port.ts';

// The engine's side of RabbitMQ in one factory, for `converge serve` and `demo --amqp`:
// connect (asserting docs/design.md §1's topology; a conflict is a startup error), then hand out the
// ingest source and the declaration publisher, both riding the one recovering connection.

export type AmqpTransportOptions = Readonly<{
  /** One URL, or a cluster's nodes (a list, or URLs separated by commas): see connectAmqp. */
  url: string | readonly string[];
  logger: Logger;
  heartbeatSeconds?: number;
  /** Unacked reports/alive in flight per consumer (default 1000). */
  prefetch?: number;
  /** x-delivery-limit of mesh.reports (default 50); part of the queue's identity once declared. */
  deliveryLimit?: number;
  connectionName?: string;
  /** The form node inboxes are declared in (default classic, topology.ts). */
  inbox?: InboxKind;
  /** New node inboxes declared a second at most (default 100, inboxDeclarer.ts). */
  inboxDeclareRate?: number;
  /** Channels checking and declaring node inboxes side by side (default defaultInboxLanes, inboxDeclarer.ts). */
  inboxLanes?: number;
}>;

export type AmqpTransport = Readonly<{
  connection: AmqpConnection;
  ingestSource: (options?: Partial<AmqpIngestSourceOptions>) => IngestSource;
  declarationPublisher: () => DeclarationPublisher;
  close: () => Promise<void>;
}>;

export async function createAmqpTransport(options: AmqpTransportOptions): Promise<AmqpTransport> {
  const { logger } = options;
  const connection = await connectAmqp({
    url: options.url,
    logger,
    topology: meshTopology(options.deliveryLimit === undefined ? {} : { deliveryLimit: options.deliveryLimit }),
    connectionName: options.connectionName ?? 'converge-engine',
    ...(options.heartbeatSeconds === undefined ? {} : { heartbeatSeconds: options.heartbeatSeconds }),
  });
  return {
    connection,
    ingestSource: (o = {}) =>
      createAmqpIngestSource(connection, { logger, ...(options.prefetch === undefined ? {} : { prefetch: options.prefetch }), ...o }),
    declarationPublisher: () =>
      createAmqpDeclarationPublisher(connection, {
        logger,
        ...(options.inbox === undefined ? {} : { inbox: options.inbox }),
        ...(options.inboxDeclareRate === undefined ? {} : { inboxDeclareRate: options.inboxDeclareRate }),
        ...(options.inboxLanes === undefined ? {} : { inboxLanes: options.inboxLanes }),
      }),
    close: () => connection.close(),
  };
}
