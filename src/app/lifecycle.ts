import type { FastifyInstance } from 'fastify';
import { closeWithin } from '../api/listenerLimits.ts';
import type { Logger } from 'pino';
import type { AuditCheckpoints } from '../engine/auditCheckpoints.ts';
import type { Ingest } from '../engine/ingest/index.ts';
import type { Relay } from '../engine/relay.ts';
import type { RolloutDriver } from '../engine/rolloutDriver.ts';
import type { SignPool } from '../engine/signPool.ts';
import type { Notifier } from '../notify/index.ts';
import type { ProjectionRunner } from '../readModel/projectionRunner.ts';
import type { EventStore } from '../store/index.ts';
import { startTracing, stopTracing, tracesEndpoint } from '../tracing/index.ts';
import type { Config } from './config.ts';
import { descriptorMargin, openFilesLimit } from './fdLimit.ts';
import { archivedManifest } from '../store/archive/withoutArchive.ts';
import { untimedSteps } from './stopSteps.ts';
import type { StopSteps } from './stopSteps.ts';

// How `serve` starts and stops its parts (src/app/server.ts wires them). Start order matters: the
// API's plugins and socket first (probes are answered while the projections catch up, /readyz
// 503), then the projections, then the relay (it publishes what the store already holds), then
// ingest. Stop runs the other way so nothing is acked after the store is closed.

export type LifecycleParts = Readonly<{
  config: Config;
  logger: Logger;
  store: EventStore;
  /** Whether a transport was given, for the log line only. */
  transport: boolean;
  app: FastifyInstance;
  /** The admin listener (--admin-listen), else null. */
  admin: FastifyInstance | null;
  runner: ProjectionRunner;
  notifier: Notifier | null;
  relay: Relay | null;
  rollouts: RolloutDriver | null;
  ingest: Ingest | null;
  auditCheckpoints: AuditCheckpoints | null;
  signPool: SignPool | null;
  sends: boolean;
  dashboardDir: string | null;
}>;

export type Lifecycle = Readonly<{
  /** Start everything and listen; resolves with the API's URL once the socket is open. */
  start: () => Promise<string>;
  /** Stop everything, each part a step of `steps` (timed in serve, stopSteps.ts). */
  stop: (steps?: StopSteps) => Promise<void>;
  /** The admin listener's URL once started, else null. */
  adminUrl: () => string | null;
}>;

export function createLifecycle(parts: LifecycleParts): Lifecycle {
  const { config, logger, app, admin, runner, notifier, relay, rollouts, ingest, auditCheckpoints, signPool } = parts;
  let adminUrl: string | null = null;
  let started = false;
  return {
    adminUrl: () => adminUrl,
    async start() {
      started = true;
      // Before anything traced runs; off, the SDK is never imported (docs/operations.md "Tracing").
      if (config.tracing) {
        await startTracing();
        logger.info({ endpoint: tracesEndpoint(process.env) }, 'tracing on: spans exported over OTLP/HTTP');
      }
      // First, so an orchestrator's probes are answered while projections catch up (/readyz: 503).
      if (admin !== null && config.adminListen !== null) {
        adminUrl = await admin.listen({ port: config.adminListen.port, host: config.adminListen.host });
        logger.info({ url: adminUrl }, 'admin listener (/healthz, /readyz, /metrics)');
      }
      warnOnFewDescriptors(config, logger);
      // The plugins load and the socket opens before the projections start: a catch-up that holds
      // the event loop (a huge store, a slow fold) made @fastify/static miss Fastify's plugin
      // timeout and `serve` exit 1. Meanwhile /healthz answers and /readyz says it is catching up.
      await app.ready();
      const url = await app.listen({ port: config.port, host: config.host });
      // Its cursors and listeners before the projections fold anything, its replay after their restore.
      await notifier?.prepare();
      await runner.start();
      await notifier?.begin();
      relay?.start();
      // The driver judges waves by the read model, so it starts once that has caught up.
      if (rollouts !== null)
        void runner.caughtUp().then(
          () => started && rollouts.start(),
          () => undefined,
        );
      await ingest?.start();
      await auditCheckpoints?.start();
      logListening(parts, url);
      await warnOfArchive(parts);
      return url;
    },
    async stop(steps = untimedSteps) {
      if (!started) return;
      started = false;
      const began = steps.startedAt() ?? performance.now();
      // The API first, so no send starts after the parts below stop; its clients get a share of
      // the stop's bound to be answered, and are cut past it (docs/operations.md#shutting-down).
      await steps.run('api', () => closeWithin(app, apiGraceMs(config)));
      await steps.run('rollouts', () => rollouts?.stop());
      // After the API and the driver, the thread's only senders (the driver stops it too).
      await steps.run('sign thread', () => signPool?.close());
      await steps.run('admin', () => (admin === null ? undefined : closeWithin(admin, apiGraceMs(config))));
      await steps.run('ingest', () => ingest?.stop());
      await steps.run('relay', () => relay?.stop());
      // After ingest: the last checkpoint covers every event this engine appended.
      await steps.run('audit checkpoint', () => auditCheckpoints?.stop());
      // Given up past its share, so the stop ends within its bound (the previous snapshot stays).
      await steps.run('snapshot', () => runner.writeSnapshot(snapshotWithinMs(config, began)));
      await steps.run('projections', () => runner.stop());
      await steps.run('notify', () => notifier?.stop());
      await steps.run('tracing', async () => {
        const lost = config.tracing ? await stopTracing() : null;
        if (lost !== null) logger.warn({ err: lost }, 'tracing: the last spans were not exported');
      });
    },
  };
}

/** How long closing a listener waits for the requests it holds: a quarter of the stop's bound. */
export const apiGraceMs = (config: Pick<Config, 'stopTimeoutMs'>): number => Math.floor(config.stopTimeoutMs / 4);

/**
 * What the last snapshot may take: what is left of --stop-timeout-ms, less a tenth of it kept for
 * the steps after it (closing the broker and the store). Its time grows with the fleet.
 */
export const snapshotWithinMs = (config: Pick<Config, 'stopTimeoutMs'>, began: number): number =>
  Math.max(0, began + config.stopTimeoutMs - config.stopTimeoutMs / 10 - performance.now());

/** A flood of connections at the open-files limit stops every accept, the probes' included. */
function warnOnFewDescriptors(config: Config, logger: Logger): void {
  const files = openFilesLimit();
  if (files !== null && files < config.maxConnections + descriptorMargin) {
    logger.warn(
      { openFilesLimit: files, maxConnections: config.maxConnections },
      `the open-files limit (${files}) leaves less than ${descriptorMargin} descriptors beyond --max-connections: lower --max-connections or raise the limit (ulimit -n, LimitNOFILE), or a flood of connections can stop every accept, the probes' included`,
    );
  }
}

function logListening(parts: LifecycleParts, url: string): void {
  const { logger, store, dashboardDir } = parts;
  logger.info(
    { url, store: store.kind, transport: parts.transport ? 'on' : 'none', sends: parts.sends, dashboard: dashboardDir !== null },
    'engine listening',
  );
  if (dashboardDir === null) logger.warn({}, 'the dashboard is not built (npm run build): / is not served');
}

/** Without --archive-dir on a store that archived history, the past reads refuse (pastReads.ts): say so once, at start. */
async function warnOfArchive({ config, store, logger }: LifecycleParts): Promise<void> {
  if (config.archiveDir !== null) return;
  const manifest = await archivedManifest(store).catch(() => null);
  if (manifest === null) return;
  const events = manifest.segments.reduce((n, s) => n + s.events, 0);
  logger.warn(
    { segments: manifest.segments.length, events },
    `the store moved ${events} events to ${manifest.segments.length} archive segment(s) and serve has no --archive-dir: the current state is served, but reads of the past that need them (state?at=, history, timeline, evidence, a send's asOf) answer 503 CONVERGE_ERR_ARCHIVE_NEEDED`,
  );
}
