import type { Logger } from 'pino';
import { createAuditCheckpoints } from '../engine/auditCheckpoints.ts';
import type { AuditCheckpoints, Witness } from '../engine/auditCheckpoints.ts';
import { createFolderWitness, createWebhookWitness } from '../engine/auditWitness.ts';
import type { EventStore } from '../store/index.ts';
import type { Config } from './config.ts';

// serve's audit checkpointer (docs/audit.md#checkpoints): the log's head signed every N events or
// seconds and on stop, each checkpoint handed to the witnesses the flags name.

/** The checkpointer and its witnesses, from --audit-key, --witness-dir and --witness-url. */
export function createCheckpointer(config: Config, store: EventStore, logger: Logger, now?: () => number): AuditCheckpoints | null {
  if (config.auditKey === null) return null;
  if (store.kind === 'esdb') {
    // Its head is computed by reading the whole log (docs/audit.md#in-the-stores): not once a minute.
    logger.warn({}, '--audit-key: an EventStoreDB store keeps no audit tree, so no checkpoints are signed');
    return null;
  }
  const witnesses: Witness[] = [];
  if (config.witnessDir !== null) witnesses.push(createFolderWitness(config.witnessDir, logger));
  if (config.witnessUrl !== null) witnesses.push(createWebhookWitness(config.witnessUrl, logger));
  if (witnesses.length === 0)
    logger.warn({}, 'audit checkpoints are kept in the store alone: set --witness-dir or --witness-url so a rewritten log shows');
  return createAuditCheckpoints({
    store,
    key: config.auditKey,
    logger,
    everyEvents: config.checkpointEveryEvents,
    everyMs: config.checkpointEveryMs,
    witnesses,
    ...(now === undefined ? {} : { now }),
  });
}
