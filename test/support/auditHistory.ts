import { generateSigningKey } from '../../src/core/declaration/index.ts';
import { makeAliveSeen, makeDeclarationSent, makeReportReceived, streamOf } from '../../src/core/events/index.ts';
import { verifyLog } from '../../src/core/audit/verifyLog.ts';
import type { VerifyResult } from '../../src/core/audit/verifyLog.ts';
import type { EventStore, NewEvent } from '../../src/store/port.ts';

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
