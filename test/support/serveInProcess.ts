import { loadConfig } from '../../src/app/config.ts';
import type { ConfigKey } from '../../src/app/config.ts';
import { createServer } from '../../src/app/server.ts';
import type { Server, ServerOptions, ServerTransport } from '../../src/app/server.ts';
import type { EventStore } from '../../src/store/index.ts';
import { createAmqpTransport } from '../../src/transport/amqpTransport.ts';
import type { AmqpTransport } from '../../src/transport/amqpTransport.ts';
import { createInProcessBroker } from '../../src/transport/inProcess.ts';
import type { InProcessBroker } from '../../src/transport/inProcess.ts';
import { logger } from './logger.ts';

// `serve`'s wiring (src/app/server.ts) started in the test's own process, as the command wires it
// but on a store the test holds: its settings over memory:, port 0 and a silent log, with no
// broker (serve without --amqp), an in-process one, or a real RabbitMQ.

/** Where the engine hears nodes: nowhere (serve without --amqp), an in-process broker, or RabbitMQ at `amqp` (or a `transport` of the test's own). */
export type ServeBroker = 'none' | 'in-process' | Readonly<{ amqp: string; heartbeatSeconds?: number }>;

export type ServeInProcessOptions<B extends ServeBroker> = Readonly<
  {
    /** serve's settings by their config keys (`graceMs: '400'`), over `memory:`, port 0 and a silent log. */
    settings?: Partial<Record<ConfigKey, string>>;
    broker?: B;
    /** Hand the engine over only once its projections have folded the store as it was at the start. */
    caughtUp?: boolean;
  } & Partial<Omit<ServerOptions, 'config' | 'store'>>
>;

export type ServedInProcess<B extends ServeBroker = 'none'> = Readonly<
  {
    engine: Server;
    /** The API's URL. */
    url: string;
    /** Stop the engine, then close its broker connection; once only, and run again after the test (the store stays open until then). */
    stop: () => Promise<void>;
  } & (B extends 'in-process' ? { broker: InProcessBroker } : B extends { amqp: string } ? { transport: AmqpTransport } : unknown)
>;

/**
 * `serve` over `store`, started. After the test (`t.after`, or a cleanup list of the test's own
 * given as `{ after }`) the engine stops, then its broker connection closes, then the store.
 */
export async function serveInProcess<B extends ServeBroker = 'none'>(
  t: { after: (cleanup: () => Promise<void>) => void },
  store: EventStore,
  options: ServeInProcessOptions<B> = {},
): Promise<ServedInProcess<B>> {
  const { settings = {}, broker: kind = 'none', caughtUp = false, ...server } = options;
  const config = loadConfig({ flags: {}, env: {} }, { store: 'memory:', port: '0', logLevel: 'silent', ...settings });
  let engine: Server | null = null;
  let amqp: AmqpTransport | null = null;
  let down = false;
  const stop = async (): Promise<void> => {
    if (down) return;
    down = true;
    await engine?.stop();
    await amqp?.close();
  };
  // Before anything opens, so a failed connect still closes the store.
  t.after(async () => {
    await stop();
    await store.close();
  });
  const broker = kind === 'in-process' ? createInProcessBroker() : null;
  if (typeof kind === 'object')
    amqp = await createAmqpTransport({
      url: kind.amqp,
      logger,
      ...(kind.heartbeatSeconds === undefined ? {} : { heartbeatSeconds: kind.heartbeatSeconds }),
    });
  const hears = broker ?? amqp;
  const transport: Partial<{ transport: ServerTransport }> =
    hears === null ? {} : { transport: { ingestSource: hears.ingestSource(), publisher: hears.declarationPublisher() } };
  engine = createServer({ config, logger, store, key: null, dashboardDir: null, ...transport, ...server });
  const url = await engine.start();
  if (caughtUp) await engine.runner.caughtUp();
  return { engine, url, stop, ...(broker === null ? {} : { broker }), ...(amqp === null ? {} : { transport: amqp }) } as ServedInProcess<B>;
}
