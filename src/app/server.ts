import type { Logger } from 'pino';
import type { FastifyInstance } from 'fastify';
import { buildAdminApp, buildApp } from '../api/buildApp.ts';
import type { SendDeclaration, SendDeclarations } from '../api/deps.ts';
import type { SigningKey } from '../core/declaration/index.ts';
import { isTerminal } from '../core/rollout/index.ts';
import type { AuditCheckpoints } from '../engine/auditCheckpoints.ts';
import { createIngest } from '../engine/ingest/index.ts';
import type { Ingest } from '../engine/ingest/index.ts';
import { createRelay } from '../engine/relay.ts';
import type { Relay } from '../engine/relay.ts';
import type { StartRolloutDeps } from '../engine/rolloutCommands.ts';
import { createRolloutDriver } from '../engine/rolloutDriver.ts';
import type { RolloutDriver } from '../engine/rolloutDriver.ts';
import type { LoadNode } from '../engine/sendView.ts';
import type { SignPool } from '../engine/signPool.ts';
import { createMetrics } from '../metrics.ts';
import type { Metrics } from '../metrics.ts';
import { createNotifier, loadNotifyConfig } from '../notify/index.ts';
import type { Notifier, NotifyConfig } from '../notify/index.ts';
import { createProjectionRunner } from '../readModel/projectionRunner.ts';
import type { ProjectionRunner } from '../readModel/projectionRunner.ts';
import { createLiveObservation, observedSinceByRecord } from '../readModel/liveObservation.ts';
import type { EventStore } from '../store/index.ts';
import type { DeclarationPublisher, IngestSource } from '../transport/port.ts';
import { apiDeps } from './apiDeps.ts';
import { withTimeoutHolds } from './rolloutTimeoutHeld.ts';
import { createCheckpointer } from './checkpointer.ts';
import type { Config } from './config.ts';
import { findDashboardDir } from './dashboardDir.ts';
import { ingestOptions } from './ingestOptions.ts';
import { createLifecycle } from './lifecycle.ts';
import { projectionRunnerOptions } from './projectionOptions.ts';
import { createSenders } from './senders.ts';
import type { StopSteps } from './stopSteps.ts';

// `converge serve` as a value (docs/design.md §6): store → projections → API, plus ingest and relay
// when a transport is given. Each part's options are set in a file of its own (projectionOptions.ts,
// ingestOptions.ts, apiDeps.ts), and the order they start and stop in, and why, in lifecycle.ts.

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
  /** Stop everything, each part a step of `steps` (timed in serve, stopSteps.ts). */
  stop: (steps?: StopSteps) => Promise<void>;
}>;

export function createServer(options: ServerOptions): Server {
  const { config, logger, store, transport } = options;
  const metrics = options.metrics ?? createMetrics({ processMetrics: true });
  const runner = createProjectionRunner(
    // Read at scrape time, after `ingest` below exists.
    projectionRunnerOptions({ config, store, logger, metrics, now: options.now, lastSeen: (node) => ingest?.lastSeenAt(node) ?? null }),
  );
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
  // Whether reports can reach the store now, for the driver's timeouts: set below, asked once running.
  let observedSince = (): number | null => null;
  // The API's rollout view says which timeouts the driver holds (asked once both exist).
  const heldView = withTimeoutHolds(runner.rollouts, (id) => rollouts?.timeoutHeld(id));
  const rollouts = rolloutDriverOf({
    options,
    key,
    runner,
    loadNode,
    clock,
    metrics,
    signPool,
    observedSince: () => observedSince(),
    onTimeoutHeld: heldView.changed,
  });
  const rolloutDeps = rolloutDepsOf(config, store, clock, runner);
  const ingest =
    transport === undefined
      ? null
      : createIngest(ingestOptions({ config, store, source: transport.ingestSource, logger, metrics, runner }));
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
  // With no ingest, or one not consuming (not yet, or its broker link lost), this engine hears no
  // node: its current view asks the record whether anyone observes (docs/design.md §3 "Not observed").
  const observation = createLiveObservation({
    store,
    readModel: runner.readModel,
    why:
      ingest !== null
        ? 'its ingest does not consume: not yet, or its broker link lost'
        : config.role === 'api'
          ? 'serve --role api runs no ingest'
          : 'started without --amqp',
    ...(ingest === null ? {} : { observing: () => ingest.observedSince() !== null }),
    ...(options.now === undefined ? {} : { now: options.now }),
  });
  observedSince =
    ingest !== null ? ingest.observedSince : observedSinceByRecord(observation, () => performance.now(), options.now ?? Date.now);
  const notifier = notifierOf(options, runner, ingest, relay);
  const auditCheckpoints = createCheckpointer(config, store, logger, options.now);
  const dashboardDir = options.dashboardDir === undefined ? findDashboardDir() : options.dashboardDir;
  const deps = apiDeps({
    config,
    store,
    logger,
    metrics,
    runner,
    ingest,
    observation,
    relay,
    rolloutDeps,
    rollouts: heldView.view,
    key,
    send,
    sendMany,
    dashboardDir,
    now: options.now,
    pluginTimeoutMs: options.pluginTimeoutMs,
  });
  const app = buildApp(deps);
  // /healthz, /readyz and /metrics on a socket of their own: answered whatever the API's clients hold.
  const admin = config.adminListen === null ? null : buildAdminApp(deps);
  const parts = { store, runner, app, metrics, ingest, relay, notifier, auditCheckpoints, send, sendMany, rollouts };
  const lifecycle = createLifecycle({
    ...parts,
    config,
    logger,
    transport: transport !== undefined,
    admin,
    signPool,
    sends: send !== null,
    dashboardDir,
  });
  return { ...parts, rolloutDeps, dashboard: dashboardDir !== null, ...lifecycle };
}

/** What the rollout commands (src/engine/rolloutCommands.ts) need from this engine. */
function rolloutDepsOf(config: Config, store: EventStore, clock: () => Date, runner: ProjectionRunner): StartRolloutDeps {
  return {
    store,
    now: clock,
    nodeStates: () => runner.readModel.nodes(),
    limits: { maxTargets: config.maxRolloutTargets, maxOpen: config.maxOpenRollouts },
    openRollouts: () => runner.rollouts.list().filter((r) => !isTerminal(r.status)).length,
  };
}

type DriverInput = Readonly<{
  options: ServerOptions;
  key: SigningKey | null;
  runner: ProjectionRunner;
  loadNode: LoadNode;
  clock: () => Date;
  metrics: Metrics;
  signPool: SignPool | null;
  /** Since when reports have been able to arrive (docs/design.md §8 "Timeouts while not observed"). */
  observedSince: () => number | null;
  onTimeoutHeld: (rollout: string) => void;
}>;

// Rollouts are driven where declarations are sent from, once per store (its lease);
// an engine serving only the API (--role api) leaves them to the others.
function rolloutDriverOf(input: DriverInput): RolloutDriver | null {
  const { options, key, runner, signPool } = input;
  const { config } = options;
  if (key === null || config.role === 'api' || options.driveRollouts === false) return null;
  return createRolloutDriver({
    store: options.store,
    key,
    logger: options.logger,
    metrics: input.metrics,
    now: input.clock,
    graceMs: config.graceMs,
    observedSince: input.observedSince,
    onTimeoutHeld: input.onTimeoutHeld,
    loadNode: input.loadNode,
    nodeOf: (node) => runner.rollouts.nodeOf(node),
    progress: (s) => runner.rollouts.progressAt(s),
    progressFolded: (id) => runner.rollouts.progressFolded(id),
    readModelPosition: () => runner.readModel.position(),
    // The driver decides again on its own rounds too: a cold start's bulk catch-up need not wake it.
    onNodeChange: (listener) => runner.readModel.onChange((c) => listener(c.node), { bulk: () => {} }),
    ...(signPool === null ? {} : { signPool }),
  });
}

/** Notifications from --notify-config (or the options'), null without one. */
function notifierOf(options: ServerOptions, runner: ProjectionRunner, ingest: Ingest | null, relay: Relay | null): Notifier | null {
  const { config } = options;
  const notify =
    options.notify === undefined ? (config.notifyConfig === null ? null : loadNotifyConfig(config.notifyConfig)) : options.notify;
  if (notify === null) return null;
  return createNotifier({
    config: notify,
    store: options.store,
    readModel: runner.readModel,
    logger: options.logger,
    ...(options.now === undefined ? {} : { now: options.now }),
    health: () => ({ ingest: ingest?.health() ?? null, relay: relay?.health() ?? null }),
    graceMs: config.graceMs,
  });
}
