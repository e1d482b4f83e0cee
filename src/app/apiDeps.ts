import type { Logger } from 'pino';
import type { ApiDeps, RolloutCommands, SendDeclaration, SendDeclarations } from '../api/deps.ts';
import type { SigningKey } from '../core/declaration/index.ts';
import { ConvergeError } from '../core/errors.ts';
import type { Ingest } from '../engine/ingest/index.ts';
import type { Relay } from '../engine/relay.ts';
import { abortRollout, pauseRollout, resumeRollout, rollbackRollout, startRollout } from '../engine/rolloutCommands.ts';
import type { StartRolloutDeps } from '../engine/rolloutCommands.ts';
import type { Metrics } from '../metrics.ts';
import type { ProjectionRunner } from '../readModel/projectionRunner.ts';
import type { LiveObservation } from '../readModel/liveObservation.ts';
import type { RolloutView } from '../readModel/rollouts.ts';
import type { EventStore } from '../store/index.ts';
import type { Config } from './config.ts';
import { pastReadsOf } from './pastReads.ts';

// What `serve` gives the HTTP API (src/api/deps.ts) and its admin listener: the engine's parts,
// and the configuration's caps, limits and keys.

export type ApiDepsInput = Readonly<{
  config: Config;
  store: EventStore;
  logger: Logger;
  metrics: Metrics;
  runner: ProjectionRunner;
  ingest: Ingest | null;
  /** Null when the engine runs ingest (it observes); else who observes, from the record (server.ts). */
  observation: LiveObservation | null;
  relay: Relay | null;
  rolloutDeps: StartRolloutDeps;
  /** The rollout view the API serves: the read side's, with the driver's held timeouts (rolloutTimeoutHeld.ts). */
  rollouts: RolloutView;
  key: SigningKey | null;
  send: SendDeclaration | null;
  sendMany: SendDeclarations | null;
  dashboardDir: string | null;
  now: (() => number) | undefined;
  pluginTimeoutMs: number | undefined;
}>;

/** The engine's rollout commands as the API takes them. */
export const rolloutCommandsOn = (deps: StartRolloutDeps): RolloutCommands => ({
  start: (input) => startRollout(deps, input),
  pause: (id, by) => pauseRollout(deps, id, by),
  resume: (id, by) => resumeRollout(deps, id, by),
  abort: (id, by) => abortRollout(deps, id, by),
  rollback: (id, by) => rollbackRollout(deps, id, by),
});

/** What a send answers on an engine with nothing to sign with. */
const noSigningKey = async (): Promise<never> => {
  throw new ConvergeError('CONVERGE_ERR_CONFIG_INVALID', 'this engine has no signing key: set --signing-key or CONVERGE_SIGNING_KEY');
};

export function apiDeps(input: ApiDepsInput): ApiDeps {
  const { config, store, logger, metrics, runner, ingest, observation, relay, key, send, sendMany, now } = input;
  return {
    dashboardDir: input.dashboardDir,
    readModel: runner.readModel,
    rollouts: input.rollouts,
    rolloutCommands: rolloutCommandsOn(input.rolloutDeps),
    store,
    pastReads: pastReadsOf(store, config.archiveDir),
    logger,
    tokens: config.apiTokens,
    projections: { ...runner, refreshMetrics: refreshMetricsWithIngest(runner, ingest, observation, metrics, now) },
    pipeline: () => ({ ingest: ingest?.health() ?? null, relay: relay?.health() ?? null }),
    metrics,
    graceMs: config.graceMs,
    // Evidence bundles carry the public halves (docs/audit.md#evidence-bundles-how-an-auditor-checks-one-with-nothing-but-converge).
    auditKey: config.auditKey,
    declarationKey: key?.publicKey ?? null,
    send: send ?? noSigningKey,
    sendMany: sendMany ?? noSigningKey,
    ...(ingest === null ? {} : { lastSeen: (node: string) => ingest.lastSeenAt(node) }),
    ...(observation === null ? {} : { observation }),
    ...(now === undefined ? {} : { now }),
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
    ...(input.pluginTimeoutMs === undefined ? {} : { pluginTimeoutMs: input.pluginTimeoutMs }),
  };
}

/** At scrape time, with the read model's gauges (liveness as the API shows it): what only a clock can say of ingest. */
function refreshMetricsWithIngest(
  runner: ProjectionRunner,
  ingest: Ingest | null,
  observation: LiveObservation | null,
  metrics: Metrics,
  now: (() => number) | undefined,
): () => Promise<void> {
  const clock = now ?? Date.now;
  const startedAt = clock();
  return async () => {
    await observation?.refresh();
    await runner.refreshMetrics();
    if (ingest === null) return;
    const h = ingest.health();
    metrics.ingestPending.set(h.pending ?? 0);
    metrics.ingestLastAppendAge.set((clock() - (h.lastSuccessAt?.getTime() ?? startedAt)) / 1000);
  };
}
