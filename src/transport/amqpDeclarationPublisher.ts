import type { ConfirmChannel, Message } from 'amqplib';
import type { Logger } from 'pino';
import type { AmqpConnection } from './amqpConnection.ts';
import { publishConfirmed } from './publishConfirmed.ts';
import { superviseChannel } from './superviseChannel.ts';
import { names } from './brokerNames.ts';
import { createInboxDeclarer } from './inboxDeclarer.ts';
import type { InboxKind } from './topology.ts';
import type { DeclarationPublisher } from './port.ts';

// Declarations out (docs/design.md §1): `Signed` JSON to mesh.declarations, routing key = node id, on
// a confirm channel, mandatory, persistent, message_id = digest, type 'declaration', header
// key-id (and, with tracing on, `traceparent`: a header the Go node ignores). The node's queue is declared before the first publish to it, so a declaration sent
// before the node ever connected waits in its inbox instead of being dropped.
//
// Inboxes are declared by inboxDeclarer.ts: each once per connection, at a bounded rate, on a
// channel of their own (an inbox in an earlier form is used as it is, with a warning).

export type AmqpDeclarationPublisherOptions = Readonly<{
  logger: Logger;
  /** The inbox form (default classic, topology.ts). */ inbox?: InboxKind;
  /** New inboxes declared a second at most (inboxDeclarer.ts). */ inboxDeclareRate?: number;
  /** Channels checking and declaring inboxes side by side (inboxDeclarer.ts). */ inboxLanes?: number;
}>;

export function createAmqpDeclarationPublisher(conn: AmqpConnection, options: AmqpDeclarationPublisherOptions): DeclarationPublisher {
  const logger = options.logger.child({ component: 'declaration-publisher' });
  const inboxes = createInboxDeclarer(conn, {
    logger,
    ...(options.inbox === undefined ? {} : { inbox: options.inbox }),
    ...(options.inboxDeclareRate === undefined ? {} : { ratePerSecond: options.inboxDeclareRate }),
    ...(options.inboxLanes === undefined ? {} : { lanes: options.inboxLanes }),
  });
  /** Message ids the broker returned as unroutable, until their confirm arrives. */
  let returned = new Set<string>();
  const channel = superviseChannel<ConfirmChannel>({
    open: () => conn.createConfirmChannel(),
    name: 'relay',
    until: conn.closed,
    logger,
    setup: async (ch) => {
      const mine = (returned = new Set());
      ch.on('return', (m: Message) => {
        const id = typeof m.properties.messageId === 'string' ? m.properties.messageId : '';
        logger.warn({ messageId: id, routingKey: m.fields.routingKey }, 'declaration returned unroutable; it will be retried');
        mine.add(id);
      });
    },
  });

  return {
    async publish(d) {
      const ch = await channel.current();
      await inboxes.declare(d.node);
      if (d.fence !== undefined && !d.fence()) throw new Error(`declaration ${d.digest} not published: the relay lease is past its bound`);
      try {
        await publishConfirmed(
          ch,
          names.declarationsExchange,
          d.node,
          d.body,
          {
            mandatory: true,
            persistent: true,
            contentType: 'application/json',
            messageId: d.digest,
            type: 'declaration',
            headers: d.traceparent === undefined ? { 'key-id': d.keyId } : { 'key-id': d.keyId, traceparent: d.traceparent },
          },
          { watch: { returned, key: d.digest } },
        );
      } catch (err) {
        // Unroutable means the queue or binding went away: declare it again on the retry.
        inboxes.forget(d.node);
        throw err;
      }
    },
    close: async () => {
      await inboxes.close();
      await channel.stop();
    },
  };
}
