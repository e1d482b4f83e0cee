import type { ConfirmChannel, Message } from 'amqplib';
import type { Logger } from 'pino';
import type { AmqpConnection } from './amqpConnection.ts';
import { UnroutableError, publishConfirmed } from './publishConfirmed.ts';
import { superviseChannel } from './superviseChannel.ts';
import { names } from './brokerNames.ts';
import { createInboxDeclarer } from './inboxDeclarer.ts';
import type { InboxKind } from './topology.ts';
import type { DeclarationPublisher, OutboundDeclaration } from './port.ts';

// Declarations out (docs/design.md §1): `Signed` JSON to mesh.declarations, routing key = node id, on
// a confirm channel, mandatory, persistent, message_id = digest, type 'declaration', header
// key-id (and, with tracing on, `traceparent`: a header the Go node ignores). The node's queue is declared before the first publish to it, so a declaration sent
// before the node ever connected waits in its inbox instead of being dropped.
//
// The first publish to a node on a connection goes out at once: an inbox that exists takes it.
// Only a declaration the broker returns unroutable makes inboxDeclarer.ts declare the inbox (each
// once per connection, at a bounded rate, on a channel of its own), and it is sent again.

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
      // Expected for a node whose inbox was never made; publish() says when it is not.
      ch.on('return', (m: Message) => void mine.add(typeof m.properties.messageId === 'string' ? m.properties.messageId : ''));
    },
  });

  const send = async (d: OutboundDeclaration): Promise<void> => {
    const ch = await channel.current();
    if (d.fence !== undefined && !d.fence()) throw new Error(`declaration ${d.digest} not published: the relay lease is past its bound`);
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
  };

  return {
    async publish(d) {
      const known = inboxes.known(d.node);
      if (known === null) {
        // Not yet seen on this connection: send first, and declare only if no inbox took it.
        try {
          await send(d);
          inboxes.routed(d.node);
          return;
        } catch (err) {
          if (!(err instanceof UnroutableError)) throw err;
          logger.debug({ node: d.node }, 'no inbox took the declaration: declaring it, then sending again');
        }
        await inboxes.declare(d.node);
      } else await known;
      try {
        await send(d);
      } catch (err) {
        if (err instanceof UnroutableError) {
          // The queue or binding went away: declare it again on the retry.
          logger.warn({ messageId: d.digest, node: d.node }, 'declaration returned unroutable; it will be retried');
          inboxes.forget(d.node);
        }
        throw err;
      }
    },
    close: async () => {
      await inboxes.close();
      await channel.stop();
    },
  };
}
