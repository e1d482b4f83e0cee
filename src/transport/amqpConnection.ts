import { setMaxListeners } from 'node:events';
import { connect } from 'amqplib';
import type { Channel, ChannelModel, ConfirmChannel, RecoveringChannelModel } from 'amqplib';
import type { Logger } from 'pino';
import { ConvergeError, isConvergeError } from '../errors.ts';
import { assertTopology } from './topology.ts';
import type { Topology } from './topology.ts';

// One recovering AMQP connection per process role (engine, simulated node). amqplib's own
// `recovery` option reconnects the connection with jittered exponential backoff and runs
// `setup` on each new connection (here: re-assert the topology); channels are re-opened by
// their owners through superviseChannel, because a channel can also die alone (a 406, a
// deleted queue) while the connection stays up.

export type AmqpConnectionOptions = Readonly<{
  url: string;
  logger: Logger;
  /**
   * AMQP heartbeat (seconds). Without one a blackholed TCP connection (no RST, no FIN) looks
   * alive for as long as the kernel's keepalive takes — minutes; with 5 s it is noticed in ~10 s.
   */
  heartbeatSeconds?: number;
  /** Asserted on the first connection (a conflict fails the start) and again on every reconnect. */
  topology?: Topology | null;
  /** Shown in the broker's connection list (`rabbitmqctl list_connections client_properties`). */
  connectionName?: string;
  reconnect?: Readonly<{ initialDelayMs?: number; maxDelayMs?: number }>;
}>;

export type AmqpConnection = Readonly<{
  /** Waits for a live connection, then opens a channel on it. */
  createChannel: () => Promise<Channel>;
  createConfirmChannel: () => Promise<ConfirmChannel>;
  isConnected: () => boolean;
  /** True while the broker has blocked publishing (a memory or disk alarm). */
  isBlocked: () => boolean;
  /** Counts connections made; a new value means every earlier channel is gone. */
  generation: () => number;
  /** Aborted by close(): channels supervised on this connection stop with it. */
  closed: AbortSignal;
  close: () => Promise<void>;
}>;

/** Set heartbeat in the URL unless the caller chose one there (amqplib reads it from the query). */
export function withHeartbeat(url: string, seconds: number): string {
  const u = new URL(url);
  if (!u.searchParams.has('heartbeat')) u.searchParams.set('heartbeat', String(seconds));
  return u.toString();
}

/** The URL with its password hidden, for logs (STYLE.md §6: never log secrets). */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable url)';
  }
}

/** A channel that swallows nothing: its 'error' is logged (an unheard 'error' event would crash the process). */
export function guardChannel<C extends Channel>(ch: C, logger: Logger, what: string): C {
  ch.on('error', (err: Error) => logger.warn({ err, channel: what }, 'channel error'));
  return ch;
}

export async function connectAmqp(options: AmqpConnectionOptions): Promise<AmqpConnection> {
  const logger = options.logger.child({ amqp: redactUrl(options.url) });
  const url = withHeartbeat(options.url, options.heartbeatSeconds ?? 5);
  const topology = options.topology ?? null;
  let connected = false;
  let blocked = false;
  let generation = 0;
  const closing = new AbortController();
  // Every supervised channel on this connection listens here (the demo: one per simulated node),
  // so Node's default of 10 would print a leak warning for what is the design.
  setMaxListeners(0, closing.signal);

  const setup = async (model: ChannelModel): Promise<void> => {
    if (topology === null) return;
    const ch = guardChannel(await model.createChannel(), logger, 'topology');
    await assertTopology(ch, topology);
    await ch.close();
  };

  let model: RecoveringChannelModel;
  try {
    model = await connect(url, {
      clientProperties: { connection_name: options.connectionName ?? 'converge' },
      recovery: {
        initialDelay: options.reconnect?.initialDelayMs ?? 200,
        maxDelay: options.reconnect?.maxDelayMs ?? 10_000,
        // Wide jitter: after a broker restart every engine and node reconnects at once.
        jitter: 0.5,
        // Fail the start at once (bad URL, wrong password, topology conflict); recover forever after.
        initialMaxRetries: 0,
        setup,
      },
    });
  } catch (cause) {
    if (isConvergeError(cause)) throw cause;
    throw new ConvergeError(
      'CONVERGE_ERR_BROKER_UNAVAILABLE',
      `cannot connect to RabbitMQ at ${redactUrl(options.url)}: ${(cause as Error).message}`,
      { cause },
    );
  }
  connected = true;
  generation = 1;

  model.on('connect', () => {
    connected = true;
    generation++;
    logger.info({ generation }, 'amqp connected');
  });
  model.on('disconnect', (err: Error) => {
    connected = false;
    blocked = false;
    logger.warn({ err: err.message }, 'amqp connection lost; reconnecting');
  });
  model.on('reconnect-scheduled', (info: { attempt: number; delay: number; error: Error }) =>
    logger.warn({ attempt: info.attempt, delayMs: info.delay, err: info.error.message }, 'amqp reconnect scheduled'),
  );
  model.on('reconnect-failed', (err: Error) => logger.error({ err }, 'amqp recovery gave up'));
  model.on('error', (err: Error) => logger.warn({ err: err.message }, 'amqp connection error'));
  model.on('blocked', (reason: string) => {
    blocked = true;
    logger.warn({ reason }, 'broker blocked publishing');
  });
  model.on('unblocked', () => {
    blocked = false;
    logger.info({}, 'broker unblocked publishing');
  });

  return {
    createChannel: () => model.createChannel(),
    createConfirmChannel: () => model.createConfirmChannel(),
    isConnected: () => connected,
    isBlocked: () => blocked,
    generation: () => generation,
    closed: closing.signal,
    close: async () => {
      connected = false;
      closing.abort();
      await model.close();
    },
  };
}
