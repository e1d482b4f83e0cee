import type { Channel, ConfirmChannel } from 'amqplib';
import type { Logger } from 'pino';
import type { AmqpConnection } from './amqpConnection.ts';
import { publishConfirmed } from './publishConfirmed.ts';
import { superviseChannel } from './superviseChannel.ts';
import type { SupervisedChannel } from './superviseChannel.ts';
import { names, nodeQueueOf } from './brokerNames.ts';
import type { NodeLink } from './port.ts';

// The Go node's side of the broker, for the simulated node and tests: consume `node.<id>`,
// publish to `mesh` with user_id = the node id (the broker checks it against the connection's
// user, so the connection must log in as that user), persistent, with a message id.

export type AmqpNodeLinkOptions = Readonly<{
  node: string;
  logger: Logger;
  /** Sent as user_id; default the node id. null sends none (a legacy or hostile node). */
  userId?: string | null;
  /** The node applies one declaration at a time. */
  prefetch?: number;
}>;

export function createAmqpNodeLink(conn: AmqpConnection, options: AmqpNodeLinkOptions): NodeLink {
  const { node } = options;
  const logger = options.logger.child({ node });
  const userId = options.userId === undefined ? node : options.userId;
  const out = superviseChannel<ConfirmChannel>({
    open: () => conn.createConfirmChannel(),
    setup: async () => undefined,
    logger,
    name: 'node-out',
    until: conn.closed,
  });
  let inbox: SupervisedChannel<Channel> | null = null;

  return {
    node,
    async consume(onMessage) {
      inbox = superviseChannel<Channel>({
        open: () => conn.createChannel(),
        name: 'node-in',
        until: conn.closed,
        logger,
        setup: async (ch) => {
          await ch.prefetch(options.prefetch ?? 1);
          // No declare: the engine declares the inbox and a node's account may only read it. Until
          // it exists the consume fails with 404 and the supervisor retries.
          await ch.consume(nodeQueueOf(node), (m) => {
            if (m === null) {
              ch.close().catch(() => undefined);
              return;
            }
            onMessage(m.content)
              .then(
                () => ch.ack(m),
                (err: unknown) => {
                  logger.warn({ err: (err as Error).message }, 'declaration handling failed; requeueing');
                  ch.nack(m, false, true);
                },
              )
              .catch(() => undefined); // ack/nack on a channel that closed meanwhile: the broker redelivers
          });
        },
      });
      await inbox.current();
    },
    async publish(key, body, messageId) {
      const ch = await out.current();
      await publishConfirmed(ch, names.meshExchange, key, body, {
        persistent: true,
        contentType: 'application/json',
        messageId,
        ...(userId === null ? {} : { userId }),
      });
    },
    async close() {
      await inbox?.stop();
      await out.stop();
    },
  };
}
