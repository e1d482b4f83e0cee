import { setMaxListeners } from 'node:events';
import { connect } from 'amqplib';
import type { Channel, ChannelModel, ConfirmChannel } from 'amqplib';
import type { Logger } from 'pino';
import { ConvergeError, isConvergeError } from '../core/errors.ts';
import { createBackoff, sleep } from '../retry.ts';
import { amqpUrlListProblems, redactUrl, splitAmqpUrls, withHeartbeat } from './amqpUrls.ts';
import { declareTopology } from './topology.ts';
import type { Topology } from './topology.ts';

// One recovering AMQP connection per process role (engine, simulated node), over one broker or
// the nodes of a cluster (`--amqp` takes several URLs). On loss it tries the *other*
// URLs first — the node just lost is the likeliest to be down — each once per round, then backs
// off (jittered, doubling) before the next round, and re-asserts the topology on every new
// connection. Channels are re-opened by their owners through superviseChannel, because a channel
// can also die alone (a 406, a deleted queue) while the connection stays up.
//
// Hand-written rather than amqplib's `recovery` option: that one reconnects to a single URL only.

/** The AMQP heartbeat when none is given (seconds). */
export const defaultHeartbeatSeconds = 5;

export type AmqpConnectionOptions = Readonly<{
  /** One URL, or a cluster's nodes: a list, or one string of URLs separated by commas (as `--amqp` takes them). */
  url: string | readonly string[];
  logger: Logger;
  /**
   * AMQP heartbeat (seconds). Without one a blackholed TCP connection (no RST, no FIN) looks
   * alive for as long as the kernel's keepalive takes — minutes; with 5 s it is noticed in ~10 s.
   */
  heartbeatSeconds?: number;
  /**
   * Longest silence while connecting (TCP connect and AMQP handshake) before that node counts as
   * failed and the next is tried: a blackholed node must not hold up the failover for the
   * kernel's connect timeout (minutes).
   */
  connectTimeoutMs?: number;
  /** Asserted on the first connection (a conflict fails the start) and again on every reconnect. */
  topology?: Topology | null;
  /** Shown in the broker's connection list (`rabbitmqctl list_connections client_properties`). */
  connectionName?: string;
  /** Backoff between rounds of attempts over every URL. */
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
  /** The URL of the live connection, password hidden; null while reconnecting. */
  connectedTo: () => string | null;
  /** Aborted by close(): channels supervised on this connection stop with it. */
  closed: AbortSignal;
  close: () => Promise<void>;
}>;

/** A channel that swallows nothing: its 'error' is logged (an unheard 'error' event would crash the process). */
export function guardChannel<C extends Channel>(ch: C, logger: Logger, what: string): C {
  ch.on('error', (err: Error) => logger.warn({ err, channel: what }, 'channel error'));
  return ch;
}

/**
 * RabbitMQ answers connection.open on a vhost it lacks (or one the user may not use) with a
 * connection.close, which amqplib reports as "Expected ConnectionOpenOk; got <ConnectionClose …>"
 * without the broker's reply text. The same on every node of a cluster, so it fails the start as
 * a ConvergeError naming the vhost, in the words `converge node enroll` uses.
 */
function vhostRefusal(url: string, err: unknown): ConvergeError | null {
  if (!(err instanceof Error) || !/Expected ConnectionOpenOk; got <ConnectionClose/.test(err.message)) return null;
  const u = new URL(url);
  // amqp://host/ and amqp://host name the default vhost, "/"; amqp://host/%2F names it too.
  const vhost = u.pathname.length > 1 ? decodeURIComponent(u.pathname.slice(1)) : '/';
  const user = u.username === '' ? 'guest' : decodeURIComponent(u.username);
  return new ConvergeError(
    'CONVERGE_ERR_BROKER_UNAVAILABLE',
    `cannot connect to RabbitMQ at ${redactUrl(url)}: vhost ${vhost} does not exist on the broker, or user ${user} has no permission on it (rabbitmqctl list_vhosts, list_user_permissions ${user})`,
    { details: { vhost }, cause: err },
  );
}

type Waiter = Readonly<{ resolve: (m: ChannelModel) => void; reject: (e: Error) => void }>;

export async function connectAmqp(options: AmqpConnectionOptions): Promise<AmqpConnection> {
  const urls = splitAmqpUrls(options.url);
  const problems = amqpUrlListProblems(urls);
  if (problems.length > 0) {
    throw new ConvergeError('CONVERGE_ERR_BROKER_UNAVAILABLE', `cannot connect to RabbitMQ: the URL list ${problems.join('; ')}`);
  }
  const targets = urls.map((u) =>
    Object.freeze({ url: withHeartbeat(u, options.heartbeatSeconds ?? defaultHeartbeatSeconds), shown: redactUrl(u) }),
  );
  const logger = options.logger.child({ amqp: targets.length === 1 ? targets[0]!.shown : targets.map((t) => t.shown) });
  const topology = options.topology ?? null;
  const closing = new AbortController();
  // Every supervised channel on this connection listens here (the demo: one per simulated node),
  // so Node's default of 10 would print a leak warning for what is the design.
  setMaxListeners(0, closing.signal);

  let live: ChannelModel | null = null;
  /** Index in `targets` of the live connection, or of the last one lost. */
  let at = 0;
  let blocked = false;
  let generation = 0;
  let waiters: Waiter[] = [];

  const open = async (i: number): Promise<ChannelModel> => {
    const model = await connect(targets[i]!.url, {
      clientProperties: { connection_name: options.connectionName ?? 'converge' },
      timeout: options.connectTimeoutMs ?? 10_000,
    }).catch((err: unknown) => {
      throw vhostRefusal(urls[i]!, err) ?? err;
    });
    // For the model's whole life: an 'error' nobody hears would crash the process.
    model.on('error', (err: Error) => logger.warn({ err: err.message }, 'amqp connection error'));
    try {
      if (topology !== null) {
        const found = await declareTopology(() => model.createChannel(), topology);
        for (const l of found.legacy) logger.warn({ queue: l.queue }, `queue ${l.queue}: ${l.advice}`);
        for (const u of found.unavailable) {
          logger.error({ queue: u.queue, err: u.reason }, `queue ${u.queue} is on a broker node that is down; going on without it`);
        }
      }
      return model;
    } catch (err) {
      await model.close().catch(() => undefined);
      throw err;
    }
  };

  const adopt = (model: ChannelModel, i: number): void => {
    live = model;
    at = i;
    blocked = false;
    generation++;
    model.on('close', (err?: Error) => {
      if (live !== model) return;
      live = null;
      blocked = false;
      if (closing.signal.aborted) return;
      logger.warn({ from: targets[i]!.shown, err: err?.message ?? null }, 'amqp connection lost; reconnecting');
      void recover();
    });
    model.on('blocked', (reason: string) => {
      blocked = true;
      logger.warn({ reason }, 'broker blocked publishing');
    });
    model.on('unblocked', () => {
      blocked = false;
      logger.info({}, 'broker unblocked publishing');
    });
    for (const w of waiters.splice(0)) w.resolve(model);
  };

  /** After a loss: the other URLs first, each once per round, then the lost one; backoff between rounds. */
  const recover = async (): Promise<void> => {
    // Wide jitter: after a broker restart every engine and node reconnects at once.
    const delays = createBackoff({
      minMs: options.reconnect?.initialDelayMs ?? 200,
      maxMs: options.reconnect?.maxDelayMs ?? 10_000,
      jitter: 0.5,
    });
    let attempt = 0;
    while (!closing.signal.aborted) {
      for (let k = 1; k <= targets.length && !closing.signal.aborted; k++) {
        const i = (at + k) % targets.length;
        attempt++;
        try {
          const model = await open(i);
          if (closing.signal.aborted) {
            await model.close().catch(() => undefined);
            return;
          }
          adopt(model, i);
          logger.info({ to: targets[i]!.shown, generation, attempt }, 'amqp connected');
          return;
        } catch (err) {
          logger.warn({ to: targets[i]!.shown, attempt, err: (err as Error).message }, 'amqp connect failed');
        }
      }
      await sleep(delays.next(), closing.signal);
    }
  };

  // The start tries each URL once, in order: a cluster with one node down still starts, while a
  // wrong password or a topology conflict (the same on every node of a cluster) fails it at once.
  const failures: string[] = [];
  for (let i = 0; i < targets.length && live === null; i++) {
    try {
      adopt(await open(i), i);
    } catch (cause) {
      if (isConvergeError(cause)) throw cause;
      failures.push(`${targets[i]!.shown}: ${(cause as Error).message}`);
      if (i === targets.length - 1) {
        throw new ConvergeError('CONVERGE_ERR_BROKER_UNAVAILABLE', `cannot connect to RabbitMQ at ${failures.join('; ')}`, { cause });
      }
    }
  }
  if (failures.length > 0) logger.warn({ failures }, 'amqp connected after skipping unreachable nodes');

  const waitForLive = (): Promise<ChannelModel> => {
    if (closing.signal.aborted) return Promise.reject(new Error('amqp connection closed'));
    if (live !== null) return Promise.resolve(live);
    return new Promise((resolve, reject) => waiters.push({ resolve, reject }));
  };

  return {
    createChannel: async () => (await waitForLive()).createChannel(),
    createConfirmChannel: async () => (await waitForLive()).createConfirmChannel(),
    isConnected: () => live !== null,
    isBlocked: () => blocked,
    generation: () => generation,
    connectedTo: () => (live === null ? null : targets[at]!.shown),
    closed: closing.signal,
    close: async () => {
      closing.abort();
      for (const w of waiters.splice(0)) w.reject(new Error('amqp connection closed'));
      waiters = [];
      const model = live;
      live = null;
      if (model !== null) await model.close().catch(() => undefined);
    },
  };
}
