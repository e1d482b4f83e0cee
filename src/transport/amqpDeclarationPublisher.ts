import type { ConfirmChannel, Message } from 'amqplib';
import type { Logger } from 'pino';
import type { AmqpConnection } from './amqpConnection.ts';
import { publishConfirmed } from './publishConfirmed.ts';
import { superviseChannel } from './superviseChannel.ts';
import { names } from './brokerNames.ts';
import { assertTopology, nodeTopology } from './topology.ts';
import type { DeclarationPublisher } from './port.ts';

// Declarations out (DESIGN §1): `Signed` JSON to mesh.declarations, routing key = node id, on
// a confirm channel, mandatory, persistent, message_id = digest, type 'declaration', header
// key-id. The node's queue is declared before the first publish to it, so a declaration sent
// before the node ever connected waits in its inbox instead of being dropped.

export type AmqpDeclarationPublisherOptions = Readonly<{ logger: Logger }>;

export function createAmqpDeclarationPublisher(conn: AmqpConnection, options: AmqpDeclarationPublisherOptions): DeclarationPublisher {
  const logger = options.logger.child({ component: 'declaration-publisher' });
  /** Nodes whose queue this channel incarnation has declared (reset with the channel: the broker may be new). */
  let declared = new Set<string>();
  /** Message ids the broker returned as unroutable, until their confirm arrives. */
  let returned = new Set<string>();
  const channel = superviseChannel<ConfirmChannel>({
    open: () => conn.createConfirmChannel(),
    name: 'relay',
    until: conn.closed,
    logger,
    setup: async (ch) => {
      declared = new Set();
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
      const seen = declared;
      if (!seen.has(d.node)) {
        await assertTopology(ch, nodeTopology(d.node));
        seen.add(d.node);
      }
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
            headers: { 'key-id': d.keyId },
          },
          { watch: { returned, key: d.digest } },
        );
      } catch (err) {
        // Unroutable means the queue or binding went away: declare it again on the retry.
        seen.delete(d.node);
        throw err;
      }
    },
    close: () => channel.stop(),
  };
}
