import { generateSigningKey } from '../../src/core/declaration/index.ts';
import { makeAliveSeen, makeDeclarationSent, makeReportReceived, streamOf } from '../../src/core/events/index.ts';
import { verifyLog } from '../../src/core/audit/verifyLog.ts';
import type { VerifyResult } from '../../src/core/audit/verifyLog.ts';
import type { KeyObject } from 'node:crypto';
import { makeObservationStarted } from '../../src/core/events/index.ts';
import { createAuditCheckpoints } from '../../src/engine/auditCheckpoints.ts';
import type { EventStore, NewEvent } from '../../src/store/port.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { recordObservation } from './history.ts';
import { logger } from './logger.ts';

// A history as the engine writes one, for the audit tree's tests: per node a declaration sent,
// the node's report of it (converged), and an alive; appended one call per node, as ingest does.

export async function writeHistory(store: EventStore, nodes: number, round = 0): Promise<void> {
  const key = generateSigningKey();
  const now = new Date(Date.UTC(2026, 0, 1, 0, round));
  for (let i = 0; i < nodes; i++) {
    const node = `web-${String(i).padStart(3, '0')}`;
    const sent = makeDeclarationSent({ node, serial: round + 1, resources: [{ id: 'nginx', version: `1.${round}` }], key, now });
    const report = makeReportReceived(
      { node, applied: ['nginx'], failed: {}, refused: '', carried: [], declared: sent.data.digest },
      Buffer.from(`${node}-${round}`),
      { messageId: `${node}-${round}`, redelivered: false, userId: node },
      now,
    );
    const alive = makeAliveSeen({ node }, now);
    await store.append([{ stream: streamOf(node), expected: 'any', events: [sent, report, alive] as NewEvent[] }]);
  }
}

export const verifyStore = (store: EventStore, pageSize?: number): Promise<VerifyResult> =>
  verifyLog(
    { head: () => store.auditHead(), read: (after, limit) => store.readStored({ after, limit }) },
    pageSize === undefined ? {} : { pageSize },
  );

/** Rounds and nodes of writeSignedStore. */
export const rounds = 4;
export const nodes = 8;

/**
 * A SQLite store written in `rounds` rounds of writeHistory, the engine's checkpointer signing the
 * head with `key` after each, and an observation span opened first, as an engine does when it starts.
 */
export async function writeSignedStore(path: string, key: KeyObject, firstRound = 0): Promise<EventStore> {
  const store = createSqliteEventStore(path);
  const cp = createAuditCheckpoints({ store, key, logger, everyEvents: 1, everyMs: 3_600_000, pollMs: 3_600_000 });
  await cp.start();
  const started = makeObservationStarted('engine-a', Date.UTC(2026, 0, 1) - 1_000, 60_000, null);
  await recordObservation(store, started);
  for (let r = firstRound; r < firstRound + rounds; r++) {
    await writeHistory(store, nodes, r);
    await cp.checkpoint();
  }
  await cp.stop();
  return store;
}
