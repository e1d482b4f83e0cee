import type { Channel, ConfirmChannel, Message } from 'amqplib';
import type { Logger } from 'pino';
import { isConvergeError } from '../core/errors.ts';
import type { AmqpConnection } from './amqpConnection.ts';
import { publishConfirmed } from './publishConfirmed.ts';
import { superviseChannel } from './superviseChannel.ts';
import { names, nodeQueueOf } from './brokerNames.ts';
import { assertTopology, nodeTopology } from './topology.ts';
import type { InboxKind } from './topology.ts';
import type { DeclarationPublisher } from './port.ts';

// Declarations out (docs/design.md §1): `Signed` JSON to mesh.declarations, routing key = node id, on
// a confirm channel, mandatory, persistent, message_id = digest, type 'declaration', header
// key-id. The node's queue is declared before the first publish to it, so a declaration sent
// before the node ever connected waits in its inbox instead of being dropped.
//
// Inboxes are declared on a channel of their own, one declaration at a time: an inbox that exists
// with other arguments (made by an earlier Converge) makes the broker refuse the
// declaration and close the channel it came on, which must not be the confirm channel other
// nodes' declarations are in flight on. Such an inbox is still a working inbox — it is bound and
// the node consumes it by name — so the relay publishes to it as it is and says once per node,
// with CONVERGE_ERR_INBOX_OUTDATED, that `converge broker migrate-inboxes` brings it to the
// current form. Stopping every declaration until an operator migrated would stop the fleet.

export type AmqpDeclarationPublisherOptions = Readonly<{
  logger: Logger;
  /** The inbox form (default classic, topology.ts). */ inbox?: InboxKind;
}>;

export function createAmqpDeclarationPublisher(conn: AmqpConnection, options: AmqpDeclarationPublisherOptions): DeclarationPublisher {
  const logger = options.logger.child({ component: 'declaration-publisher' });
  /** Nodes whose queue this channel incarnation has declared (reset with the channel: the broker may be new). */
  let declared = new Set<string>();
  /** Nodes already logged as having an outdated inbox (once per node per process). */
  const outdated = new Set<string>();
  /** The channel inboxes are declared on (a refusal closes it; the next declaration opens another). */
  let declaring: Promise<Channel> | null = null;
  /** Declarations one at a time, so a refusal closes the channel under no one else's. */
  let queue: Promise<unknown> = Promise.resolve();
  const declareChannel = (): Promise<Channel> => {
    if (declaring !== null) return declaring;
    const opening: Promise<Channel> = conn.createChannel().then((ch) => {
      // A refusal arrives as the rejected call and as this event; the call is where it is handled.
      ch.on('error', () => undefined);
      ch.on('close', () => {
        if (declaring === opening) declaring = null;
      });
      return ch;
    });
    declaring = opening;
    return opening;
  };
  const declareInbox = (node: string): Promise<void> => {
    const run = async (): Promise<void> => {
      const topology = nodeTopology(node, options.inbox ?? 'classic');
      try {
        await assertTopology(await declareChannel(), topology);
      } catch (err) {
        declaring = null;
        if (!isConvergeError(err, 'CONVERGE_ERR_TOPOLOGY_CONFLICT')) throw err;
        // It exists in another form: make sure it is bound (as it was when it was made) and use it.
        const ch = await declareChannel();
        for (const b of topology.bindings) await ch.bindQueue(b.queue, b.exchange, b.routingKey);
        if (!outdated.has(node)) {
          outdated.add(node);
          const name = nodeQueueOf(node);
          logger.warn(
            { code: 'CONVERGE_ERR_INBOX_OUTDATED', node, queue: name, err: (err as Error).message },
            `inbox ${name} exists with other arguments than this Converge declares (an earlier version's); declarations are published to it as it is. Run \`converge broker migrate-inboxes\` to bring the inboxes to the current form (docs/operations.md)`,
          );
        }
      }
    };
    const next = queue.then(run, run);
    queue = next.catch(() => undefined);
    return next;
  };
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
        await declareInbox(d.node);
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
    close: async () => {
      const ch = declaring;
      declaring = null;
      await ch?.then((c) => c.close()).catch(() => undefined);
      await channel.stop();
    },
  };
}
