import type { Logger } from 'pino';
import type { IngestOptions } from '../engine/ingest/index.ts';
import type { Metrics } from '../metrics.ts';
import type { ProjectionRunner } from '../readModel/projectionRunner.ts';
import type { EventStore } from '../store/index.ts';
import type { IngestSource } from '../transport/port.ts';
import type { Config } from './config.ts';

// The ingest's options as `serve` sets them: liveness recorded as transitions under this engine's
// lease, each report's send known from the read model, and a budget per node when one is set.

export type IngestOptionsInput = Readonly<{
  config: Config;
  store: EventStore;
  source: IngestSource;
  logger: Logger;
  metrics: Metrics;
  runner: ProjectionRunner;
}>;

export function ingestOptions(input: IngestOptionsInput): IngestOptions {
  const { config, store, source, logger, metrics, runner } = input;
  return {
    store,
    source,
    logger,
    metrics,
    trustMissingUserId: config.trustMissingUserId,
    liveness: {
      engine: config.engineId,
      graceMs: config.graceMs,
      flushMs: config.lastSeenFlushMs,
      folded: () => foldedLastSeen(runner),
    },
    knownSends: (node) => runner.readModel.get(node),
    ...(config.nodeReportRate === 0 ? {} : { nodeBudget: { ratePerSecond: config.nodeReportRate, burst: config.nodeReportBurst } }),
  };
}

/** A store written before the lease: the fold's last-seen times, once caught up. */
async function foldedLastSeen(runner: ProjectionRunner): Promise<ReadonlyMap<string, number>> {
  await runner.caughtUp();
  const known = new Map<string, number>();
  for (const s of runner.readModel.nodes()) if (s.lastSeenAt !== null) known.set(s.node, Date.parse(s.lastSeenAt));
  return known;
}
