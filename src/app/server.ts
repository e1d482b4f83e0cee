import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { buildAdminApp, buildApp } from '../api/buildApp.ts';
import type { RolloutCommands, SendDeclaration, SendDeclarations } from '../api/deps.ts';
import type { SigningKey } from '../core/declaration/index.ts';
import { ConvergeError } from '../core/errors.ts';
import type { EventStore } from '../store/index.ts';
import type { DeclarationPublisher, IngestSource } from '../transport/port.ts';
import type { Config } from './config.ts';
import { createIngest } from '../engine/ingest/index.ts';
import type { Ingest } from '../engine/ingest/index.ts';
import { createMetrics } from '../metrics.ts';
import type { Metrics } from '../metrics.ts';
import { createProjectionRunner } from '../readModel/projectionRunner.ts';
import type { ProjectionRunner } from '../readModel/projectionRunner.ts';
import { createRelay } from '../engine/relay.ts';
import type { Relay } from '../engine/relay.ts';
import { abortRollout, rollbackRollout, pauseRollout, resumeRollout, startRollout } from '../engine/rolloutCommands.ts';
import type { LoadNode } from '../engine/sendView.ts';
import type { SignPool } from '../engine/signPool.ts';
import { createRolloutDriver } from '../engine/rolloutDriver.ts';
import type { RolloutDriver } from '../engine/rolloutDriver.ts';
import type { StartRolloutDeps } from '../engine/rolloutCommands.ts';
import { findDashboardDir } from './dashboardDir.ts';
import { isTerminal } from '../core/rollout/index.ts';
import { descriptorMargin, openFilesLimit } from './fdLimit.ts';
import { createNotifier, loadNotifyConfig } from '../notify/index.ts';
import type { Notifier, NotifyConfig } from '../notify/index.ts';
import type { AuditCheckpoints } from '../engine/auditCheckpoints.ts';
import { createCheckpointer } from './checkpointer.ts';
import { startTracing, stopTracing, tracesEndpoint } from '../tracing/index.ts';
import { pastReadsOf } from './pastReads.ts';
import { createSenders } from './senders.ts';

// `converge serve` as a value (docs/design.md §6): store → projections → API, plus ingest and relay
// when a transport is given. Start order matters: the API's plugins and socket first (probes are
// answered while the projections catch up, /readyz 503), then the projections, then the relay
// (it publishes what the store already holds), then ingest.
// Stop runs the other way so nothing is acked after the store is closed.

export type ServerTransport = Readonly<{
  ingestSource: IngestSource;
  publisher: DeclarationPublisher;
  /** Before the relay publishes on a lease taken from a holder that did not give it up (relay.ts). */
  fenceBroker?: (signal: AbortSignal) => Promise<void>;
}>;

export type ServerOptions = Readonly<{
  config: Config;
  logger: Logger;
  store: EventStore;
  transport?: ServerTransport;
  key?: SigningKey | null;
  metrics?: Metrics;
  /** Overrides for tests and the demo. */
  now?: () => number;
  /**
   * Drive rollouts (default: whenever the engine can send and is not --role api). False for a
   * test that writes a rollout's decisions itself.
   */
  driveRollouts?: boolean;
  /** Fastify's pluginTimeout, for a test that proves nothing waits on the projections to load them. */
  pluginTimeoutMs?: number;
  /** The built dashboard to serve at / (default: dist/dashboard if built; null: none). */
  dashboardDir?: string | null;
  /** Notifications (default: from --notify-config, if set). */
  notify?: NotifyConfig | null;
  /** The thread bulk sends are signed on (default: one started at the first; null: the engine's own thread). */
  signPool?: SignPool | null;
}>;

export type Server = Readonly<{
  store: EventStore;
  runner: ProjectionRunner;
  app: FastifyInstance;
  metrics: Metrics;
  ingest: Ingest | null;
  relay: Relay | null;
  /** Notifications (null: no --notify-config). */
  notifier: Notifier | null;
  /** Signed audit checkpoints (null: no --audit-key, or a store that keeps no tree). */
  auditCheckpoints: AuditCheckpoints | null;
  send: SendDeclaration | null;
  /** Many nodes in one store transaction (POST /v1/declarations); null without a signing key. */
  sendMany: SendDeclarations | null;
  /** The rollout driver: null without a signing key, and under --role api (another engine drives). */
  rollouts: RolloutDriver | null;
  /** What the rollout commands (src/engine/rolloutCommands.ts) need from this engine. */
  rolloutDeps: StartRolloutDeps;
  /** Whether / serves the dashboard (it is served only once `npm run build` has built it). */
  dashboard: boolean;
  /** The admin listener's URL once started (`--admin-listen`), else null. */
  adminUrl: () => string | null;
  /** Start everything and listen; resolves with the API's URL once the socket is open. */
  start: () => Promise<string>;
  stop: () => Promise<void>;
}>;

/** The engine's rollout commands as the API takes them. */
export const rolloutCommandsOn = (deps: StartRolloutDeps): RolloutCommands => ({
  start: (input) => startRollout(deps, input),
  pause: (id, by) => pauseRollout(deps, id, by),
  resume: (id, by) => resumeRollout(deps, id, by),
  abort: (id, by) => abortRollout(deps, id, by),
  rollback: (id, by) => rollbackRollout(deps, id, by),
});

export function createServer(options: ServerOptions): Server {
  const { config, logger, store, transport } = options;
  const metrics = options.metrics ?? createMetrics({ processMetrics: true });
  const runner = createProjectionRunner({
    store,
    logger,
    metrics,
    graceMs: config.graceMs,
    // Read at scrape time, after `ingest` below exists.
    lastSeen: (node) => ingest?.lastSeenAt(node) ?? null,
    ...(config.snapshotPath === null
      ? {}
      : {
          snapshot: {
            path: config.snapshotPath,
            ...(config.snapshotFormerPath === null ? {} : { formerPath: config.snapshotFormerPath }),
            everyEvents: config.snapshotEvery,
            everyEventsPerNode: config.snapshotPerNode,
          },
        }),
    ...(options.now === undefined ? {} : { now: options.now }),
    // A fold from zero over archived history reads the archive too (docs/operations.md "Retention and archive").
    ...(config.archiveDir === null
      ? {}
      : { coldStore: async () => (await import('../store/archive/withArchive.ts')).withArchive(store, config.archiveDir!) }),
  });
  const key = options.key === undefined ? config.signingKey : options.key;
  // The read model already holds each node's revision, carried ports and latest send; the
  // senders fall back to the store itself when they lost a race.
  const loadNode: LoadNode = async (node) => runner.readModel.get(node) ?? { revision: -1n, carried: [], sent: null };
  const clock = options.now === undefined ? () => new Date() : () => new Date(options.now!());
  const { send, sendMany, signPool } = createSenders({
    store,
    key,
    loadNode,
    now: clock,
    metrics,
    logger,
    ...(options.signPool === undefined ? {} : { signPool: options.signPool }),
  });
  // Rollouts are driven where declarations are sent from, once per store (its lease);
  // an engine serving only the API (--role api) leaves them to the others.
  const rollouts =
    key === null || config.role === 'api' || options.driveRollouts === false
      ? null
      : createRolloutDriver({
          store,
          key,
          logger,
          metrics,
          now: clock,
          graceMs: config.graceMs,
          loadNode,
          nodeOf: (node) => runner.readModel.get(node),
          progress: (s) => runner.rollouts.progressAt(s),
          progressFolded: (id) => runner.rollouts.progressFolded(id),
          readModelPosition: () => runner.readModel.position(),
          // The driver decides again on its own rounds too: a cold start's bulk catch-up need not wake it.
          onNodeChange: (listener) => runner.readModel.onChange((c) => listener(c.node), { bulk: () => {} }),
          ...(signPool === null ? {} : { signPool }),
        });
  const rolloutDeps: StartRolloutDeps = {
    store,
    now: clock,
    nodeStates: () => runner.readModel.nodes(),
    limits: { maxTargets: config.maxRolloutTargets, maxOpen: config.maxOpenRollouts },
    openRollouts: () => runner.rollouts.list().filter((r) => !isTerminal(r.status)).length,
  };
  const ingest =
    transport === undefined
      ? null
      : createIngest({
          store,
          source: transport.ingestSource,
          logger,
          metrics,
          trustMissingUserId: config.trustMissingUserId,
          liveness: {
            engine: config.engineId,
            graceMs: config.graceMs,
            flushMs: config.lastSeenFlushMs,
            // A store written before the lease: the fold's last-seen times, once caught up.
            folded: async () => {
              await runner.caughtUp();
              const known = new Map<string, number>();
              for (const s of runner.readModel.nodes()) if (s.lastSeenAt !== null) known.set(s.node, Date.parse(s.lastSeenAt));
              return known;
            },
          },
          knownSends: (node) => runner.readModel.get(node),
          ...(config.nodeReportRate === 0 ? {} : { nodeBudget: { ratePerSecond: config.nodeReportRate, burst: config.nodeReportBurst } }),
        });
  const relay =
    transport === undefined
      ? null
      : createRelay({
          store,
          publisher: transport.publisher,
          logger,
          metrics,
          ...(transport.fenceBroker === undefined ? {} : { fenceBroker: transport.fenceBroker }),
        });
  const notify =
    options.notify === undefined ? (config.notifyConfig === null ? null : loadNotifyConfig(config.notifyConfig)) : options.notify;
  const notifier =
    notify === null
      ? null
      : createNotifier({
          config: notify,
          store,
          readModel: runner.readModel,
          logger,
          ...(options.now === undefined ? {} : { now: options.now }),
          health: () => ({ ingest: ingest?.health() ?? null, relay: relay?.health() ?? null }),
          graceMs: config.graceMs,
        });

  const auditCheckpoints = createCheckpointer(config, store, logger, options.now);

  /** Without --archive-dir on a store that archived history, the past reads refuse (pastReads.ts): say so once, at start. */
  async function warnOfArchive(): Promise<void> {
    if (config.archiveDir !== null) return;
    const manifest = await store.archiveManifest?.().catch(() => null);
    if (manifest === undefined || manifest === null || manifest.segments.length === 0) return;
    const events = manifest.segments.reduce((n, s) => n + s.events, 0);
    logger.warn(
      { segments: manifest.segments.length, events },
      `the store moved ${events} events to ${manifest.segments.length} archive segment(s) and serve has no --archive-dir: the current state is served, but reads of the past that need them (state?at=, history, timeline, evidence, a send's asOf) answer 503 CONVERGE_ERR_ARCHIVE_NEEDED`,
    );
  }

  const startedAt = (options.now ?? Date.now)();
  const dashboardDir = options.dashboardDir === undefined ? findDashboardDir() : options.dashboardDir;
  const apiDeps = {
    dashboardDir,
    readModel: runner.readModel,
    rollouts: runner.rollouts,
    rolloutCommands: rolloutCommandsOn(rolloutDeps),
    store,
    pastReads: pastReadsOf(store, config.archiveDir),
    logger,
    tokens: config.apiTokens,
    projections: {
      ...runner,
      // At scrape time, with the read model's gauges: what only a clock can say of ingest.
      refreshMetrics: async () => {
        await runner.refreshMetrics();
        if (ingest === null) return;
        const h = ingest.health();
        metrics.ingestPending.set(h.pending ?? 0);
        metrics.ingestLastAppendAge.set(((options.now ?? Date.now)() - (h.lastSuccessAt?.getTime() ?? startedAt)) / 1000);
      },
    },
    pipeline: () => ({ ingest: ingest?.health() ?? null, relay: relay?.health() ?? null }),
    metrics,
    graceMs: config.graceMs,
    // Evidence bundles carry the public halves (docs/audit.md#evidence-bundles-how-an-auditor-checks-one-with-nothing-but-converge).
    auditKey: config.auditKey,
    declarationKey: key?.publicKey ?? null,
    ...(send === null
      ? {
          send: async () => {
            throw new ConvergeError(
              'CONVERGE_ERR_CONFIG_INVALID',
              'this engine has no signing key: set --signing-key or CONVERGE_SIGNING_KEY',
            );
          },
        }
      : { send }),
    ...(sendMany === null
      ? {
          sendMany: async () => {
            throw new ConvergeError(
              'CONVERGE_ERR_CONFIG_INVALID',
              'this engine has no signing key: set --signing-key or CONVERGE_SIGNING_KEY',
            );
          },
        }
      : { sendMany }),
    ...(ingest === null ? {} : { lastSeen: (node: string) => ingest.lastSeenAt(node) }),
    ...(options.now === undefined ? {} : { now: options.now }),
    // What the API holds open, and for how long.
    caps: {
      streams: config.maxStreams,
      streamsPerClient: config.maxStreamsPerClient,
      awaits: config.maxAwaits,
      awaitsPerClient: config.maxAwaitsPerClient,
    },
    listener: { maxConnections: config.maxConnections, idleMs: config.idleTimeoutMs, requestTimeoutMs: config.requestTimeoutMs },
    streamMaxMs: config.streamMaxMs,
    writeLimits: { maxBulkDeclarations: config.maxBulkDeclarations, maxBytesPerTokenPerMinute: config.maxBytesPerTokenPerMinute },
    ...(options.pluginTimeoutMs === undefined ? {} : { pluginTimeoutMs: options.pluginTimeoutMs }),
  };
  const app = buildApp(apiDeps);
  // /healthz, /readyz and /metrics on a socket of their own: answered whatever the API's clients hold.
  const admin = config.adminListen === null ? null : buildAdminApp(apiDeps);
  let adminUrl: string | null = null;

  let started = false;
  return {
    store,
    runner,
    app,
    metrics,
    ingest,
    relay,
    notifier,
    auditCheckpoints,
    send,
    sendMany,
    rollouts,
    rolloutDeps,
    dashboard: dashboardDir !== null,
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
      const files = openFilesLimit();
      if (files !== null && files < config.maxConnections + descriptorMargin) {
        logger.warn(
          { openFilesLimit: files, maxConnections: config.maxConnections },
          `the open-files limit (${files}) leaves less than ${descriptorMargin} descriptors beyond --max-connections: lower --max-connections or raise the limit (ulimit -n, LimitNOFILE), or a flood of connections can stop every accept, the probes' included`,
        );
      }
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
      logger.info(
        {
          url,
          store: store.kind,
          transport: transport === undefined ? 'none' : 'on',
          sends: send !== null,
          dashboard: dashboardDir !== null,
        },
        'engine listening',
      );
      if (dashboardDir === null) logger.warn({}, 'the dashboard is not built (npm run build): / is not served');
      await warnOfArchive();
      return url;
    },
    async stop() {
      if (!started) return;
      started = false;
      await app.close();
      await rollouts?.stop();
      // After the API and the driver, the thread's only senders (the driver stops it too).
      await signPool?.close();
      await admin?.close();
      await ingest?.stop();
      await relay?.stop();
      // After ingest: the last checkpoint covers every event this engine appended.
      await auditCheckpoints?.stop();
      await runner.writeSnapshot();
      await runner.stop();
      await notifier?.stop();
      const lost = config.tracing ? await stopTracing() : null;
      if (lost !== null) logger.warn({ err: lost }, 'tracing: the last spans were not exported');
    },
  };
}
