import { digestOf, readDeclaration } from '../../../src/core/declaration/index.ts';
import type { VerifyingKey } from '../../../src/core/declaration/index.ts';
import { createSimulatedNode } from '../../../src/simulation/simulatedNode.ts';
import type { SimulatedNode } from '../../../src/simulation/simulatedNode.ts';
import { connectAmqp } from '../../../src/transport/amqpConnection.ts';
import type { AmqpConnection } from '../../../src/transport/amqpConnection.ts';
import { createAmqpNodeLink } from '../../../src/transport/amqpNodeLink.ts';
import type { NodeLink } from '../../../src/transport/port.ts';
import { meshTopology, nodeTopology } from '../../../src/transport/topology.ts';
import { parseSigned } from '../../../src/core/wire/index.ts';
import { logger } from '../logger.ts';
import { sleep } from '../until.ts';

// The simulated fleet the fault scenarios that run engines as processes share: the broker's
// topology declared up front, nodes enrolled over AMQP with every declaration they take recorded,
// and a report load that retries each report until the broker confirms it.

/** A declaration a node took from its inbox, recorded before the node handled it. */
export type Receipt = Readonly<{ node: string; digest: string; serial: number; at: number }>;

/** A declaration an API accepted: `at` when the POST was sent, `answeredAt` when its 202 came. */
export type Accepted = Readonly<{ digest: string; node: string; via: string; at: number; answeredAt: number }>;

/** The node's inbox, recording every declaration it receives before the node handles it. */
export function recordingLink(link: NodeLink, receipts: Receipt[]): NodeLink {
  return {
    node: link.node,
    consume: (onMessage) =>
      link.consume(async (body) => {
        const { declaration } = parseSigned(body);
        receipts.push({ node: link.node, digest: digestOf(declaration), serial: readDeclaration(declaration).serial, at: Date.now() });
        await onMessage(body);
      }),
    publish: (key, body, messageId) => link.publish(key, body, messageId),
    close: () => link.close(),
  };
}

/** The mesh and every node's inbox, declared once before the engines start. */
export async function declareMesh(url: string, ids: readonly string[]): Promise<void> {
  const mesh = meshTopology();
  const inboxes = ids.map((id) => nodeTopology(id));
  const conn = await connectAmqp({
    url,
    logger,
    topology: {
      exchanges: mesh.exchanges,
      queues: [...mesh.queues, ...inboxes.flatMap((t) => t.queues)],
      bindings: [...mesh.bindings, ...inboxes.flatMap((t) => t.bindings)],
    },
  });
  await conn.close();
}

/**
 * Enrol each node (`enroll` answers its AMQP URL) and start it, recording what it receives.
 * The scenario's `sims` and `conns` are filled as they start, so its clean-up closes what did
 * even when a later node fails to.
 */
export async function enrollSimulatedNodes(
  o: Readonly<{
    enroll: (node: string) => Promise<string>;
    ids: readonly string[];
    key: VerifyingKey;
    /** Names the connections (`<tag>-<node>`) in the broker's list. */
    tag: string;
    receipts: Receipt[];
    sims: SimulatedNode[];
    conns: AmqpConnection[];
  }>,
): Promise<void> {
  for (const id of o.ids) {
    const conn = await connectAmqp({ url: await o.enroll(id), logger, connectionName: `${o.tag}-${id}`, heartbeatSeconds: 2 });
    o.conns.push(conn);
    const sim = createSimulatedNode({
      link: recordingLink(createAmqpNodeLink(conn, { node: id, logger }), o.receipts),
      verifyingKey: o.key,
      logger,
    });
    await sim.start();
    o.sims.push(sim);
  }
}

export type ReportLoad = Readonly<{
  done: Promise<void>;
  /** The load's reports, and the reports the nodes made of the declarations they applied. */
  sent: () => number;
  confirmed: () => Set<string>;
  /** Message id → when its report was first published (the first attempt). */
  sentAt: () => ReadonlyMap<string, number>;
  /** Message id → when the broker confirmed it. */
  confirmedAt: () => ReadonlyMap<string, number>;
  /** Stop at once; `finish` lets each node's report in flight end first. */
  stop: () => void;
  finish: () => void;
}>;

/** Each node reports one after another, every `paceMs`, each report retried until the broker confirms it. */
export function startReportLoad(sims: readonly SimulatedNode[], paceMs: number): ReportLoad {
  let finished = false;
  let stopped = false;
  let sent = 0;
  const sentAt = new Map<string, number>();
  const confirmedAt = new Map<string, number>();
  const done = Promise.all(
    sims.map(async (sim, k) => {
      for (let i = 0; !finished && !stopped; i++) {
        sent++;
        const at = Date.now();
        const c = await sim.report({ applied: [`load-${k}-${i}`] }).catch(() => null);
        if (c !== null) {
          sentAt.set(c.messageId, at);
          confirmedAt.set(c.messageId, Date.now());
        }
        await sleep(paceMs);
      }
    }),
  ).then(() => undefined);
  return {
    done,
    sent: () => sent + sims.reduce((n, s) => n + s.confirmedReports().filter((r) => r.declared !== null).length, 0),
    confirmed: () => new Set(sims.flatMap((s) => s.confirmedReports().map((r) => r.messageId))),
    sentAt: () => sentAt,
    confirmedAt: () => confirmedAt,
    stop: () => {
      stopped = true;
    },
    finish: () => {
      finished = true;
    },
  };
}
