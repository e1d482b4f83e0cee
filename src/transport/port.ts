import type { ErrorCode } from '../core/errors.ts';
import type { InboundKind } from './brokerNames.ts';

// The transport's two sides as the engine sees them, with no broker in the types: the AMQP
// implementation (amqp*.ts) and the in-process one (inProcess.ts) both provide them, so ingest,
// relay and the simulated node run unchanged on either.

export type { InboundKind } from './brokerNames.ts';

/** One message a node sent, as received: raw body plus the transport facts we record. */
export type Delivery = Readonly<{
  kind: InboundKind;
  body: Buffer;
  messageId: string | null;
  /** The broker-validated sender (AMQP `user_id`), or null when the message carried none. */
  userId: string | null;
  redelivered: boolean;
  routingKey: string;
  /** Opaque to the engine: ties the delivery to the channel it came on (never ack across channels). */
  handle: unknown;
}>;

/**
 * Consuming began (the first time, or again after a loss), or stopped because the link to the
 * broker was lost (the connection or its consuming channel; not a pause or stop asked for). Told at the moment
 * the transport noticed, so the engine can say when it heard no node (docs/design.md §3 "Not observed").
 */
export type LinkListener = (link: 'lost' | 'consuming') => void;

export interface IngestSource {
  /**
   * Start consuming; `onDelivery` is called once per delivery, in arrival order, and `onLink` with
   * 'consuming' once consuming first begins (before any delivery: consumer setup may keep failing
   * at start), then 'lost' and 'consuming' as the link is lost and consuming resumes.
   */
  start(onDelivery: (d: Delivery) => void, onLink?: LinkListener): Promise<void>;
  /**
   * Acknowledge deliveries whose events are durable. Deliveries from a channel that has since
   * closed are skipped: the broker has already requeued them and will redeliver.
   */
  ack(deliveries: readonly Delivery[]): void;
  /** True while the delivery's channel is open, i.e. acking it would still mean something. */
  isLive(d: Delivery): boolean;
  /**
   * Move a delivery to the dead-letter queue with the error code and reason in headers
   * (`x-converge-error`, `x-converge-reason`), then ack the original. Resolves once both happened.
   */
  deadLetter(d: Delivery, code: ErrorCode, reason: string): Promise<void>;
  /**
   * Refuse a delivery back to the broker (AMQP: basic.nack, requeue=false): its queue dead-letters
   * it to mesh.dead itself (docs/design.md §1's x-dead-letter-exchange), with `x-death` reason `rejected`
   * and the sender's own user_id. No copy passes through the engine and no confirm is awaited, so
   * it is what sheds a flood; the code cannot travel with the message here — the
   * engine counts and logs it. A delivery whose channel has closed is skipped (it is redelivered).
   */
  reject(d: Delivery, code: ErrorCode): void;
  /** Stop new deliveries; deliveries in flight can still be acked. */
  pause(): Promise<void>;
  stop(): Promise<void>;
}

/** A declaration ready to leave: `body` is the encoded `Signed`. */
export type OutboundDeclaration = Readonly<{
  node: string;
  digest: string;
  keyId: string;
  body: Buffer;
  /** The W3C trace context of the relay's publish, sent as the `traceparent` header (a node ignores it). */
  traceparent?: string;
  /**
   * Checked immediately before the message is written, after any wait for a channel: false refuses
   * the publish. The relay's lease bound (docs/operations.md, "Fencing the relay"): checked only
   * before the call, a publish that waited out a partition for a channel went out after the bound.
   */
  fence?: () => boolean;
}>;

export interface DeclarationPublisher {
  /** Resolves once the broker confirmed the message and routed it to the node's queue; rejects otherwise. */
  publish(d: OutboundDeclaration): Promise<void>;
  close(): Promise<void>;
}

/** What a node does with the broker (the Go node's side), for the simulated node and tests. */
export interface NodeLink {
  readonly node: string;
  /** Consume this node's inbox; the message is acked when `onMessage` resolves. */
  consume(onMessage: (body: Buffer) => Promise<void>): Promise<void>;
  /** Publish to `mesh` with routing key `report` or `alive`; resolves on the broker's confirm. */
  publish(key: InboundKind, body: Buffer, messageId: string): Promise<void>;
  close(): Promise<void>;
}
