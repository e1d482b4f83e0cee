import { connectAmqp } from '../../src/transport/amqpConnection.ts';
import type { AmqpConnection } from '../../src/transport/amqpConnection.ts';
import { createAmqpNodeLink } from '../../src/transport/amqpNodeLink.ts';
import type { InboundKind, NodeLink } from '../../src/transport/port.ts';
import { encodeReport } from '../../src/core/wire/index.ts';
import { logger } from '../support/logger.ts';
import { sleep } from '../support/until.ts';
import type { FaultLab } from './faultScenario.ts';

// The nodes of a fault scenario: real broker accounts publishing reports with stable message ids,
// each retried until the broker confirms it, as the Go node does.

export type NodeConn = { node: string; conn: AmqpConnection; link: NodeLink; raw: (userId: string | null) => NodeLink };

export async function connectNode(lab: FaultLab, node: string): Promise<NodeConn> {
  const url = await lab.enroll(node);
  const conn = await connectAmqp({ url, logger, topology: null, connectionName: `fault-node-${node}`, heartbeatSeconds: 2 });
  return {
    node,
    conn,
    link: createAmqpNodeLink(conn, { node, logger }),
    raw: (userId) => createAmqpNodeLink(conn, { node, logger, userId }),
  };
}

/** Publish until confirmed, same message id each time (a lost confirm may still have landed). */
export async function publishUntilConfirmed(
  link: NodeLink,
  key: InboundKind,
  body: Buffer,
  messageId: string,
  stop: () => boolean,
): Promise<boolean> {
  for (let attempt = 0; !stop(); attempt++) {
    try {
      await link.publish(key, body, messageId);
      return true;
    } catch {
      await sleep(Math.min(20 * 2 ** attempt, 500));
    }
  }
  return false;
}

export type Load = Readonly<{
  done: Promise<void>;
  sent: () => number;
  confirmed: () => ReadonlySet<string>;
  /** Abandon the load, even reports not yet confirmed. */
  stop: () => void;
  /** Start no new report; the ones being published are still retried until confirmed. */
  finish: () => void;
}>;

/**
 * Each node publishes `perNode` reports (Infinity: until `finish()`), one every `paceMs`, each
 * retried until confirmed.
 */
export function startLoad(nodes: readonly NodeConn[], perNode: number, paceMs: number): Load {
  let sent = 0;
  let stopped = false;
  let finished = false;
  const confirmed = new Set<string>();
  const one = async (n: NodeConn): Promise<void> => {
    for (let i = 0; i < perNode && !stopped && !finished; i++) {
      const messageId = `${n.node}/${i}`;
      const body = encodeReport({ node: n.node, applied: [`r${i}`], failed: {}, refused: '', carried: [], declared: null });
      sent++;
      if (await publishUntilConfirmed(n.link, 'report', body, messageId, () => stopped)) confirmed.add(messageId);
      if (paceMs > 0) await sleep(paceMs);
    }
  };
  return {
    done: Promise.all(nodes.map(one)).then(() => undefined),
    sent: () => sent,
    confirmed: () => confirmed,
    stop: () => {
      stopped = true;
    },
    finish: () => {
      finished = true;
    },
  };
}

export const nodeIds = (prefix: string, n: number): string[] =>
  Array.from({ length: n }, (_, i) => `${prefix}-${Date.now().toString(36)}-${i}`);
export const PER_NODE = Number(process.env['CONVERGE_FAULT_PER_NODE'] ?? 300);
export const PACE_MS = 5;

export async function withNodes<T>(lab: FaultLab, prefix: string, n: number, body: (nodes: NodeConn[]) => Promise<T>): Promise<T> {
  const nodes: NodeConn[] = [];
  try {
    for (const id of nodeIds(prefix, n)) nodes.push(await connectNode(lab, id));
    return await body(nodes);
  } finally {
    for (const n2 of nodes) {
      await n2.link.close().catch(() => undefined);
      await n2.conn.close().catch(() => undefined);
    }
  }
}
