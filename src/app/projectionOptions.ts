import type { Logger } from 'pino';
import type { Metrics } from '../metrics.ts';
import type { ProjectionRunnerOptions } from '../readModel/projectionRunner.ts';
import type { EventStore } from '../store/index.ts';
import type { Config } from './config.ts';

// The projection runner's options as `serve` sets them from its configuration: snapshots when
// --snapshot-path is set, and the archive for a fold from zero when --archive-dir is.

export type ProjectionOptionsInput = Readonly<{
  config: Config;
  store: EventStore;
  logger: Logger;
  metrics: Metrics;
  now: (() => number) | undefined;
  /** The ingest's exact last-seen time, read at scrape time. */
  lastSeen: (node: string) => Date | null;
}>;

export function projectionRunnerOptions(input: ProjectionOptionsInput): ProjectionRunnerOptions {
  const { config, store, logger, metrics, now, lastSeen } = input;
  return {
    store,
    logger,
    metrics,
    graceMs: config.graceMs,
    lastSeen,
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
    ...(now === undefined ? {} : { now }),
    // A fold from zero over archived history reads the archive too (docs/operations.md "Retention and archive").
    ...(config.archiveDir === null
      ? {}
      : { coldStore: async () => (await import('../store/archive/withArchive.ts')).withArchive(store, config.archiveDir!) }),
  };
}
