import type { ConfirmChannel, Options } from 'amqplib';

// Publish on a confirm channel and resolve only when the broker has taken responsibility
// (STYLE.md: amqplib — wait for confirms before anything is considered sent).

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

/**
 * Publish and wait for the confirm. With `mandatory`, an unroutable message comes back as a
 * basic.return *before* its ack (AMQP 0-9-1 §1.8.3.9 as RabbitMQ implements it), so `returned`
 * — filled by the channel's 'return' listener, keyed by message id — tells a routed ack from an
 * unroutable one.
 */
export async function publishConfirmed(
  ch: ConfirmChannel,
  exchange: string,
  routingKey: string,
  body: Buffer,
  options: Options.Publish,
  returned?: Set<string>,
): Promise<void> {
  let fits = true;
  const confirmed = new Promise<void>((resolve, reject) => {
    fits = ch.publish(exchange, routingKey, body, options, (err: unknown) => {
      const id = options.messageId;
      if (err) return reject(err instanceof Error ? err : new Error(`broker nacked the message (${String(err)})`));
      if (returned !== undefined && id !== undefined && returned.delete(id)) {
        return reject(new Error(`message ${id} was returned unroutable by ${exchange} with key ${JSON.stringify(routingKey)}`));
      }
      resolve();
    });
  });
  if (!fits) await Promise.all([drained(ch), confirmed]);
  else await confirmed;
}
