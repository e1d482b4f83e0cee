import type { ConfirmChannel, Options } from 'amqplib';

// Publish on a confirm channel and resolve only when the broker has taken responsibility
// (amqplib — wait for confirms before anything is considered sent).

/** Resolve on 'drain', reject on 'close': a channel that dies while full must not hang us. */
export function drained(ch: ConfirmChannel): Promise<void> {
  return new Promise((resolve, reject) => {
    const onDrain = (): void => {
      ch.removeListener('close', onClose);
      resolve();
    };
    const onClose = (): void => {
      ch.removeListener('drain', onDrain);
      reject(new Error('channel closed while waiting for drain'));
    };
    ch.once('drain', onDrain);
    ch.once('close', onClose);
  });
}

/** The broker returned the message unroutable: no queue is bound to its key (mandatory publishes). */
export class UnroutableError extends Error {}

/** Keys of messages the broker returned unroutable, filled by the channel's 'return' listener, and this message's key. */
export type ReturnWatch = Readonly<{ returned: Set<string>; key: string }>;

/**
 * How long a publish waits for its confirm before it counts as failed (and is retried with the
 * same message id, which every consumer here treats as the same message). A defence, not a
 * measured failure: a broker that neither confirms nor closes the channel would otherwise stall
 * the relay for good. In the cluster failover runs confirms came within 2 s of a
 * node's death, as nacks where they failed.
 */
export const defaultConfirmTimeoutMs = 10_000;

export type PublishConfirmedOptions = Readonly<{ watch?: ReturnWatch; timeoutMs?: number }>;

/**
 * Publish and wait for the confirm. With `mandatory`, an unroutable message comes back as a
 * basic.return *before* its ack (AMQP 0-9-1 §1.8.3.9 as RabbitMQ implements it), so `watch` —
 * the set the channel's 'return' listener fills, and the key it would file this message under —
 * tells a routed ack from an unroutable one. Rejects if no confirm comes within `timeoutMs`.
 */
export async function publishConfirmed(
  ch: ConfirmChannel,
  exchange: string,
  routingKey: string,
  body: Buffer,
  properties: Options.Publish,
  options: PublishConfirmedOptions = {},
): Promise<void> {
  const { watch } = options;
  const timeoutMs = options.timeoutMs ?? defaultConfirmTimeoutMs;
  let fits = true;
  let unroutable = false;
  let timer: NodeJS.Timeout | undefined;
  const confirmed = new Promise<void>((resolve, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new Error(
            `no confirm from the broker within ${timeoutMs} ms for a message to ${exchange} with key ${JSON.stringify(routingKey)}`,
          ),
        ),
      timeoutMs,
    );
    fits = ch.publish(exchange, routingKey, body, properties, (err: unknown) => {
      if (err) return reject(err instanceof Error ? err : new Error(`broker nacked the message (${String(err)})`));
      if (watch !== undefined && watch.returned.delete(watch.key)) {
        unroutable = true;
        return reject(
          new UnroutableError(`message ${watch.key} was returned unroutable by ${exchange} with key ${JSON.stringify(routingKey)}`),
        );
      }
      resolve();
    });
  });
  try {
    if (!fits) await Promise.all([drained(ch), confirmed]);
    else await confirmed;
  } catch (err) {
    // A nack or a lost confirm retires the channel (its owner's supervisor opens a new one):
    // measured on RabbitMQ 3.10, after a quorum queue's leader node was killed a
    // channel opened meanwhile had every later publish to that queue nacked, while a new channel
    // on the same connection was fine.
    // (An unroutable message is the route's fault, not the channel's.)
    if (!unroutable) ch.close().catch(() => undefined);
    throw err;
  } finally {
    clearTimeout(timer);
  }
}
