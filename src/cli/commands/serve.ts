import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { createServer } from '../../app/server.ts';
import type { ServerTransport } from '../../app/server.ts';
import { connectServerTransport } from '../../app/amqp.ts';
import type { Command } from '../command.ts';
import { openStore } from '../command.ts';

export function ensureStoreDir(store: string, cwd: string): void {
  if (!store.startsWith('sqlite:')) return;
  const path = store.slice('sqlite:'.length);
  if (path !== ':memory:') mkdirSync(dirname(resolve(cwd, path)), { recursive: true });
}

export const serve: Command = {
  name: 'serve',
  usage: 'converge serve [--store <url>] [--amqp <url>] [--port <n>] [--signing-key <pem>] [--api-tokens <list>]',
  summary: 'the engine: ingest, relay, projections and the HTTP API',
  args: [0, 0],
  options: {},
  defaultLogLevel: 'info',
  run: async ({ io, config, logger }) => {
    ensureStoreDir(config.store, io.cwd);
    const store = openStore(config, io, false);
    let amqp: Awaited<ReturnType<typeof connectServerTransport>> | null = null;
    let transport: ServerTransport | undefined;
    if (config.amqpUrl !== null) {
      amqp = await connectServerTransport(config.amqpUrl, logger);
      transport = amqp.transport;
    } else {
      logger.warn({}, 'no --amqp / CONVERGE_AMQP_URL: serving the API over the store without ingest or relay');
    }
    if (config.signingKey === null) logger.warn({}, 'no --signing-key / CONVERGE_SIGNING_KEY: POST declarations is disabled');
    const engine = createServer({ config, logger, store, ...(transport === undefined ? {} : { transport }) });
    try {
      const url = await engine.start();
      io.stderr(`converge serving on ${url}\n`);
      await io.interrupted;
      logger.info({}, 'stopping');
    } finally {
      await engine.stop();
      await amqp?.close();
      await store.close();
    }
    return 0;
  },
};
