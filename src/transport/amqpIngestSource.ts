import type { Channel, ConfirmChannel, ConsumeMessage, Message } from 'amqplib';
import type { Logger } from 'pino';
import type { ErrorCode } from '../core/errors.ts';
import type { AmqpConnection } from './amqpConnection.ts';
import { deadLetterCopy, defaultDeadLetterBodyBytes } from './deadLetterCopy.ts';
import { publishConfirmed } from './publishConfirmed.ts';
import { superviseChannel } from './superviseChannel.ts';
import type { SupervisedChannel } from './superviseChannel.ts';
import { inboundKinds, names, queueOfKind } from './brokerNames.ts';
import type { Delivery, InboundKind, IngestSource } from './port.ts';

// Consumes mesh.reports and mesh.alive (docs/design.md §1). Every delivery is tied to the channel
// incarnation it came on: acking a tag on a newer channel would ack a different message (tags
// restart at 1 per channel), so acks for a closed channel are dropped — the broker requeued
// those messages and will redeliver them, and their deterministic event ids make the second
// append a no-op.

export type AmqpIngestSourceOptions = Readonly<{
  logger: Logger;
  /** Unacked deliveries in flight per consumer: the batch window and the backpressure bound (default 2,000). */
  prefetch?: number;
  queues?: Readonly<Partial<Record<InboundKind, string>>>;
  /** Longest `x-converge-reason` header kept (headers share one 64 KiB frame table). */
  maxReasonLength?: number;
  /** A refused body longer than this goes to mesh.dead as its prefix, with its size and sha256 (deadLetterCopy.ts). */
  maxDeadLetterBytes?: number;
}>;

/**
 * Deliveries in flight per consumer. Ingest keeps up to four batches of 500 committing while the
 * next fills (ingest.ts, maxSyncing): with 1,000 the broker stopped delivering once two batches
 * were out, the event loop waited for the store, and each commit held one batch (bench/engine at
 * 10,000 nodes: 0.65 → 0.86 of the baseline with 2,000). The bound on what a consumer holds is
 * this many bodies: at the wire limit (256 KiB) 512 MiB, at a routine report's size about 1 MiB.
 */
export const defaultPrefetch = 2000;

/** Tells a returned dead letter from the others on its channel (message ids may be absent or repeated). */
const deadLetterIdHeader = 'x-converge-dead-letter-id';

type Session = {
  readonly ch: Channel;
  live: boolean;
  /** Its consumers are set up, or one has delivered: its close stops consuming. */
  consuming: boolean;
  readonly outstanding: Set<number>;
  readonly consumerTags: string[];
};
type Handle = Readonly<{ session: Session; message: ConsumeMessage }>;

const handleOf = (d: Delivery): Handle => d.handle as Handle;

export function createAmqpIngestSource(conn: AmqpConnection, options: AmqpIngestSourceOptions): IngestSource {
  const logger = options.logger.child({ component: 'ingest-source' });
  const prefetch = options.prefetch ?? defaultPrefetch;
  const queues: Record<InboundKind, string> = {
    report: options.queues?.report ?? queueOfKind.report,
    alive: options.queues?.alive ?? queueOfKind.alive,
  };
  const maxReason = options.maxReasonLength ?? 1024;
  const maxDeadBody = options.maxDeadLetterBytes ?? defaultDeadLetterBodyBytes;
  let consumer: SupervisedChannel<Channel> | null = null;
  let dead: SupervisedChannel<ConfirmChannel> | null = null;
  let current: Session | null = null;
  /** Dead letters the broker returned unroutable on the current dead-letter channel, by their id header. */
  let deadReturned = new Set<string>();
  let deadLetterSeq = 0;
  /** A pause or stop was asked for: a channel closing after it is no loss of the link. */
  let stopping = false;
  /**
   * Not consuming: not yet (consumer setup may fail at start for as long as a queue's node is
   * down), or lost and not yet resumed. Told once each way, the first consuming too.
   */
  let lost = true;

  function toDelivery(kind: InboundKind, session: Session, m: ConsumeMessage): Delivery {
    const p = m.properties;
    return {
      kind,
      body: m.content,
      messageId: typeof p.messageId === 'string' && p.messageId !== '' ? p.messageId : null,
      userId: typeof p.userId === 'string' && p.userId !== '' ? p.userId : null,
      redelivered: m.fields.redelivered,
      routingKey: m.fields.routingKey,
      handle: { session, message: m } satisfies Handle,
    };
  }

  /** Settle `tags` on their channel: ack, or nack without requeue (the queue dead-letters them). */
  function settleOn(session: Session, tags: Set<number>, how: 'ack' | 'reject'): void {
    if (!session.live) return;
    const settle = (tag: number, multiple: boolean): void => {
      const m = { fields: { deliveryTag: tag } } as ConsumeMessage;
      if (how === 'ack') session.ch.ack(m, multiple);
      else session.ch.nack(m, multiple, false);
    };
    try {
      // Longest run of the oldest outstanding tags that are all being settled: one `multiple` frame.
      let upTo = -1;
      for (const t of session.outstanding) {
        if (!tags.has(t)) break;
        upTo = t;
      }
      if (upTo >= 0) {
        settle(upTo, true);
        for (const t of session.outstanding) {
          if (t > upTo) break;
          session.outstanding.delete(t);
          tags.delete(t);
        }
      }
      for (const t of tags) {
        settle(t, false);
        session.outstanding.delete(t);
      }
    } catch (err) {
      // The channel closed under us; its messages are requeued by the broker.
      session.live = false;
      logger.warn({ err: (err as Error).message }, `${how} on a closing channel dropped`);
    }
  }

  const bySession = (deliveries: readonly Delivery[]): Map<Session, Set<number>> => {
    const out = new Map<Session, Set<number>>();
    for (const d of deliveries) {
      const { session, message } = handleOf(d);
      let tags = out.get(session);
      if (tags === undefined) out.set(session, (tags = new Set()));
      tags.add(message.fields.deliveryTag);
    }
    return out;
  };

  // Refusals of one turn are settled together: a flood arrives as runs of one sender's messages,
  // and a run is one nack frame and one command in the quorum queue's log instead of hundreds.
  let rejecting: Delivery[] = [];
  const flushRejects = (): void => {
    const batch = rejecting;
    rejecting = [];
    for (const [session, tags] of bySession(batch)) settleOn(session, tags, 'reject');
  };

  const source: IngestSource = {
    async start(onDelivery, onLink) {
      dead = superviseChannel<ConfirmChannel>({
        open: () => conn.createConfirmChannel(),
        setup: async (ch) => {
          const mine = (deadReturned = new Set());
          ch.on('return', (m: Message) => {
            const id = m.properties.headers?.[deadLetterIdHeader];
            logger.warn(
              { queue: names.deadQueue },
              'dead letter returned unroutable (mesh.dead missing or on a node that is down); it will be retried',
            );
            if (typeof id === 'string') mine.add(id);
          });
        },
        logger,
        name: 'dead-letter',
        until: conn.closed,
      });
      consumer = superviseChannel<Channel>({
        open: () => conn.createChannel(),
        name: 'ingest',
        until: conn.closed,
        logger,
        setup: async (ch) => {
          const session: Session = { ch, live: true, consuming: false, outstanding: new Set(), consumerTags: [] };
          current = session;
          ch.once('close', () => {
            session.live = false;
            // Closed alone or with its connection, and not by a pause, a stop or close(): the
            // engine hears no node until a new channel consumes.
            if (session.consuming && !stopping && !conn.closed.aborted && !lost) {
              lost = true;
              onLink?.('lost');
            }
          });
          // Per-consumer prefetch (global=false), so alive traffic cannot starve reports.
          await ch.prefetch(prefetch, false);
          if (stopping) return;
          // Consuming once every consumer is set up, or at a first delivery before that: a setup
          // failing before either starts or resumes nothing, and either is told before any delivery.
          const consuming = (): void => {
            if (session.consuming) return;
            session.consuming = true;
            if (lost) {
              lost = false;
              onLink?.('consuming');
            }
          };
          for (const kind of inboundKinds) {
            const { consumerTag } = await ch.consume(queues[kind], (m) => {
              if (m === null) {
                // basic.cancel from the broker (queue deleted, failover): start over on a new channel.
                logger.warn({ queue: queues[kind] }, 'consumer cancelled by the broker');
                ch.close().catch(() => undefined);
                return;
              }
              consuming();
              session.outstanding.add(m.fields.deliveryTag);
              onDelivery(toDelivery(kind, session, m));
            });
            session.consumerTags.push(consumerTag);
          }
          consuming();
          logger.info({ queues, prefetch }, 'consuming');
        },
      });
      await consumer.current();
    },

    ack(deliveries) {
      for (const [session, tags] of bySession(deliveries)) settleOn(session, tags, 'ack');
    },

    isLive: (d) => handleOf(d).session.live,

    reject(d) {
      if (rejecting.push(d) === 1) setImmediate(flushRejects);
    },

    async deadLetter(d, code: ErrorCode, reason: string) {
      if (dead === null) throw new Error('ingest source not started');
      const { message } = handleOf(d);
      const p = message.properties;
      const ch = await dead.current();
      // Published by us rather than nack(requeue=false): broker dead-lettering keeps the
      // original headers and adds x-death, but cannot say *why* we refused the message.
      // user_id is moved to a header: RabbitMQ checks user_id against *our* connection's user.
      // Mandatory: if mesh.dead cannot take it (deleted, or a classic queue on a cluster node that
      // is down), the broker returns it instead of confirming a copy that went nowhere, and the
      // delivery stays unacked until a retry lands.
      const id = String(++deadLetterSeq);
      const copy = deadLetterCopy(message.content, maxDeadBody);
      await publishConfirmed(
        ch,
        names.deadExchange,
        message.fields.routingKey,
        copy.body,
        {
          persistent: true,
          mandatory: true,
          ...(p.contentType === undefined ? {} : { contentType: p.contentType }),
          ...(p.messageId === undefined ? {} : { messageId: p.messageId }),
          ...(p.type === undefined ? {} : { type: p.type }),
          ...(p.timestamp === undefined ? {} : { timestamp: p.timestamp }),
          headers: {
            ...(p.headers ?? {}),
            'x-converge-error': code,
            'x-converge-reason': reason.slice(0, maxReason),
            'x-converge-queue': queues[d.kind],
            'x-converge-user-id': d.userId ?? '',
            [deadLetterIdHeader]: id,
            ...copy.headers,
          },
        },
        { watch: { returned: deadReturned, key: id } },
      );
      source.ack([d]);
    },

    async pause() {
      // Stop new deliveries but keep the channel, so what is in flight can still be acked.
      stopping = true;
      const session = current;
      if (session === null || !session.live) return;
      for (const tag of session.consumerTags.splice(0)) await session.ch.cancel(tag).catch(() => undefined);
    },

    async stop() {
      stopping = true;
      await consumer?.stop();
      await dead?.stop();
    },
  };
  return source;
}
