import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { boundDeadLetterQueue, deadLetterPolicyName, vhostOfAmqpUrl } from '../brokerAdmin/deadLetterPolicy.ts';
import { closeOtherEngineConnections, engineConnectionPrefix, fenceClient } from '../brokerAdmin/engineFence.ts';
import { toConvergeError } from '../core/errors.ts';
import { sleep } from '../retry.ts';
import { defaultHeartbeatSeconds } from '../transport/amqpConnection.ts';
import type { Config } from './config.ts';
import type { AmqpConnection } from '../transport/amqpConnection.ts';
import { createAmqpTransport } from '../transport/amqpTransport.ts';
import type { AmqpTransportOptions } from '../transport/amqpTransport.ts';
import type { ServerTransport } from './server.ts';

// The engine's two transport ports over one recovering RabbitMQ connection, for `serve` and
// `demo --amqp`: createAmqpTransport connects and asserts docs/design.md §1's topology (a conflicting
// broker fails the start); this only shapes it as the engine's port.

export type AmqpServerTransport = Readonly<{
  connection: AmqpConnection;
  /** The connection's client-provided name, unique to this process (the relay's fence spares it). */
  connectionName: string;
  transport: ServerTransport;
  close: () => Promise<void>;
}>;

/** `converge-engine <instance>`: the broker lists each engine apart, and a fence knows its own. */
export const engineConnectionName = (): string => `${engineConnectionPrefix} ${randomBytes(4).toString('hex')}`;

export async function connectServerTransport(
  url: string,
  logger: Logger,
  connectionName = engineConnectionName(),
  options: Omit<AmqpTransportOptions, 'url' | 'logger' | 'connectionName'> = {},
): Promise<AmqpServerTransport> {
  const amqp = await createAmqpTransport({ ...options, url, logger, connectionName });
  const transport: ServerTransport = { ingestSource: amqp.ingestSource(), publisher: amqp.declarationPublisher() };
  return {
    connection: amqp.connection,
    connectionName,
    transport,
    close: async () => {
      await transport.publisher.close();
      await amqp.close();
    },
  };
}

/**
 * Bound mesh.dead by its operator policy (src/brokerAdmin/deadLetterPolicy.ts), unless
 * --dead-letter-max-length is 0. A broker without the management API, or credentials without the
 * administrator tag, leave it unbounded: logged as an error that says what to do, and the engine
 * runs on — ingest matters more than the bound.
 */
export async function boundDeadLetters(config: Config, amqpUrl: string, logger: Logger): Promise<void> {
  if (config.deadLetterMaxLength === 0) return;
  const vhost = vhostOfAmqpUrl(amqpUrl);
  const bound = { maxLength: config.deadLetterMaxLength, maxBytes: config.deadLetterMaxBytes };
  try {
    await boundDeadLetterQueue({ managementUrl: config.managementUrl, vhost, ...bound });
    logger.info({ vhost, policy: deadLetterPolicyName, ...bound }, 'mesh.dead bounded (operator policy, drop-head)');
  } catch (err) {
    const e = toConvergeError(err, 'CONVERGE_ERR_BROKER_ADMIN');
    logger.error(
      { code: e.code, err: e.message, vhost, policy: deadLetterPolicyName, ...bound },
      'mesh.dead is NOT bounded: set --management-url to an administrator of this vhost, or set the operator policy yourself and --dead-letter-max-length 0 (docs/operations.md)',
    );
  }
}

/**
 * The relay's broker fence for serve (docs/operations.md "Fencing the relay"): close the other
 * engines' connections on the vhost through the management API. When the API cannot, wait out the
 * broker's heartbeat bound instead (three heartbeats: by then the broker has closed a connection
 * it stopped hearing from, or its frames have landed), logged as an error that says what to do.
 */
export function relayBrokerFence(
  managementUrl: string,
  amqpUrl: string,
  own: string,
  logger: Logger,
): (signal: AbortSignal) => Promise<void> {
  const vhost = vhostOfAmqpUrl(amqpUrl);
  const client = fenceClient(managementUrl);
  return async (signal) => {
    try {
      const closed = await closeOtherEngineConnections({ client, vhost, own });
      logger.info({ vhost, closed: closed.length }, "relay fence: the other engines' broker connections are closed");
    } catch (err) {
      const waitMs = 3 * defaultHeartbeatSeconds * 1000;
      logger.error(
        { err: (err as Error).message, vhost, waitMs },
        "relay fence: could not close the other engines' broker connections (set --management-url to an administrator of this vhost); waiting out the broker's heartbeat bound before publishing",
      );
      await sleep(waitMs, signal);
    }
  };
}
