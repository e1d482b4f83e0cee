import { createServer } from '../../app/server.ts';
import type { ServerTransport } from '../../app/server.ts';
import { boundDeadLetters, connectServerTransport, relayBrokerFence } from '../../app/amqp.ts';
import { resolve } from 'node:path';
import type { Logger } from 'pino';
import type { Retention } from '../../app/retention.ts';
import type { Config } from '../../app/config.ts';
import { isConvergeError, toConvergeError } from '../../core/errors.ts';
import { storeIdentity } from '../../engine/storeIdentity.ts';
import type { EventStore } from '../../store/index.ts';
import { redactUrl } from '../../transport/amqpUrls.ts';
import { claimVhost, vhostOwnerQueue } from '../../transport/vhostOwner.ts';
import { stopWithin } from '../../app/stopWithin.ts';
import { createStopSteps } from '../../app/stopSteps.ts';
import type { EngineLock } from '../../store/sqlite/sqliteEngineLock.ts';
import type { Run } from '../command.ts';
import { openStore, sqliteFileOf } from '../command.ts';
import { makeLogger } from '../logger.ts';

// `converge serve` (docs/design.md §6): the engine on the configured store, with ingest and relay when a
// broker is configured, until Ctrl-C or SIGTERM.
export const run: Run = async ({ io, config }) => {
  const logger = makeLogger(config.logLevel);
  // One engine per SQLite file (an SQLite store has no relay lease): a second serve is refused
  // before it opens anything (src/store/sqlite/sqliteEngineLock.ts).
  const file = sqliteFileOf(config, io);
  if (config.retain !== null) {
    const { archiveTargetOf, archiveUnsupported } = await import('./storeArchive.ts');
    if (archiveTargetOf(config, io) === null) throw archiveUnsupported(config.store.split(':')[0] ?? config.store);
  }
  let lock: EngineLock | null = null;
  if (file !== null) {
    try {
      lock = (await import('../../store/sqlite/sqliteEngineLock.ts')).lockSqliteStoreForEngine(file);
    } catch (err) {
      // The code in the JSON log for supervisors; the one-line reason follows on stderr, exit 1.
      const e = toConvergeError(err);
      logger.error({ code: e.code, ...e.details }, e.message);
      throw e;
    }
  }
  try {
    return await serve({ io, config, logger });
  } finally {
    lock?.release();
  }
};

async function serve({ io, config, logger }: Pick<Parameters<Run>[0], 'io' | 'config'> & { logger: Logger }): Promise<number> {
  // The writer thread (src/store/sqlite/sqliteWriterThread.ts, default) and group commit (walSync.ts) only
  // here: a long-running engine, where a thread's start is paid once and the event loop's time
  // goes to ingest and the API. Group commit is safe because serve holds the engine lock, so its
  // relay, the one reader that publishes, is in this process and reads nothing not yet synced.
  // Other commands write inline at FULL, so another process never reads a row before it is on disk.
  const store = await openStore(config, io, { create: true, sqlite: { sync: config.sqliteSync } });
  await refuseNewerSchema(store);
  let amqp: Awaited<ReturnType<typeof connectServerTransport>> | null = null;
  let transport: ServerTransport | undefined;
  if (config.role === 'api') {
    // More engines on one shared store, for reads and `await`; ingest and the relay
    // stay with the engines that run them (single active consumer, the relay lease).
    logger.info({}, '--role api: serving the API over the store; ingest and relay are left to other engines');
  } else if (config.amqpUrl !== null) {
    amqp = await connectServerTransport(config.amqpUrl, logger, undefined, {
      inbox: config.inboxQueue,
      inboxDeclareRate: config.inboxDeclareRate,
    });
    transport = { ...amqp.transport, fenceBroker: relayBrokerFence(config.managementUrl, config.amqpUrl, amqp.connectionName, logger) };
    await claimVhostForStore(amqp, store, config, logger);
    await boundDeadLetters(config, config.amqpUrl, logger);
  } else {
    logger.warn({}, 'no --amqp / CONVERGE_AMQP_URL: serving the API over the store without ingest or relay');
  }
  if (config.signingKey === null) logger.warn({}, 'no --signing-key / CONVERGE_SIGNING_KEY: POST declarations is disabled');
  const engine = createServer({ config, logger, store, ...(transport === undefined ? {} : { transport }) });
  let retention: Retention | null = null;
  // Each step logged with its ms, and the one a late stop was held in named (src/app/stopSteps.ts).
  const steps = createStopSteps(logger);
  const stop = async (): Promise<void> => {
    await steps.run('retention', () => retention?.stop());
    await engine.stop(steps);
    await steps.run('broker', () => amqp?.close());
    await steps.run('store', () => store.close());
  };
  try {
    const url = await engine.start();
    const target = config.retain === null ? null : (await import('./storeArchive.ts')).archiveTargetOf(config, io);
    if (config.retain !== null && target !== null && config.archiveDir !== null && config.snapshotPath !== null) {
      retention = (await import('../../app/retention.ts')).startRetention({
        store: target,
        archiveDir: resolve(io.cwd, config.archiveDir),
        retainMs: config.retain,
        snapshotPath: resolve(io.cwd, config.snapshotPath),
        logger,
      });
    }
    const admin = engine.adminUrl();
    io.stderr(`converge serving on ${url}${engine.dashboard ? `  dashboard ${url}/` : ''}${admin === null ? '' : `  probes ${admin}`}\n`);
    await io.interrupted;
    logger.info({ stopTimeoutMs: config.stopTimeoutMs }, 'stopping');
  } catch (err) {
    await stop();
    throw err;
  }
  await stopWithin(stop, config.stopTimeoutMs, logger, steps);
  return 0;
}

/**
 * A store of a newer schema (docs/operations.md "Upgrades") stops serve at start, exit 1, with or
 * without a broker; an API-only serve otherwise stayed up answering CONVERGE_ERR_STORE_SCHEMA to
 * every request. Any other failure is left to the engine, which starts and retries a store it
 * cannot reach yet.
 */
async function refuseNewerSchema(store: EventStore): Promise<void> {
  // A store that does not answer within a few seconds is the engine's to wait for, as before.
  let timer: NodeJS.Timeout | undefined;
  const waited = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, 5_000);
    timer.unref();
  });
  try {
    const head = store.headPosition();
    head.catch(() => undefined); // past the wait, its failure is the engine's to meet
    await Promise.race([head, waited]);
  } catch (err) {
    if (isConvergeError(err, 'CONVERGE_ERR_STORE_SCHEMA')) {
      await store.close().catch(() => undefined);
      throw err;
    }
  } finally {
    clearTimeout(timer);
  }
}

/** One store per vhost (src/transport/vhostOwner.ts): refuse to start on another store's vhost. */
async function claimVhostForStore(
  amqp: Awaited<ReturnType<typeof connectServerTransport>>,
  store: EventStore,
  config: Config,
  logger: Logger,
): Promise<void> {
  const sqlite = config.store.startsWith('sqlite:') ? config.store.slice('sqlite:'.length) : null;
  const shown = sqlite !== null && sqlite !== ':memory:' ? `sqlite:${resolve(sqlite)}` : redactUrl(config.store);
  const mine = { id: await storeIdentity(store), store: shown, engine: config.engineId };
  try {
    const { shared } = await claimVhost(amqp.connection, mine, { logger, allowShared: config.allowSharedVhost });
    if (!shared) logger.info({ store: mine.id, queue: vhostOwnerQueue }, 'the vhost records its reports in this store');
  } catch (err) {
    const e = toConvergeError(err);
    logger.error({ code: e.code, ...e.details }, e.message);
    await amqp.close();
    await store.close();
    throw e;
  }
}
