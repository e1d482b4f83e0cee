import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateSigningKey } from '../../src/core/declaration/index.ts';
import { connectAmqp } from '../../src/transport/amqpConnection.ts';
import { createAmqpNodeLink } from '../../src/transport/amqpNodeLink.ts';
import { parseSigned } from '../../src/core/wire/index.ts';
import { startEngineOverAmqp } from '../support/faults/engineOverAmqp.ts';
import { startRabbitCluster } from '../support/rabbitCluster.ts';
import type { RabbitCluster } from '../support/rabbitCluster.ts';
import { logger } from '../support/logger.ts';
import { sleep, until } from '../support/until.ts';
import { nodeIds, recoveryFrom, settleAll, startLoad, tally } from './scenarios.ts';
import type { NodeConn, Scenario, ScenarioResult } from './scenarios.ts';

// The engine over a 3-node RabbitMQ cluster, given every node's URL; under a steady
// load of confirmed reports, the node it is connected to is stopped for good. Ingest must resume
// on another node within seconds and every confirmed report be stored exactly once; a declaration
// sent after the failover must reach its node (the relay's publisher resumed too).
//
// Three simulated nodes publish: one lists the engine's node first (so it fails over too, as a Go
// node given the same list would), two list the surviving nodes first.

export type FailoverHow = 'stop' | 'kill';

const howSaid: Record<FailoverHow, string> = {
  stop: '`rabbitmqctl stop`',
  kill: 'SIGKILL of its Erlang VM',
};

export const clusterFailoverFaults = (how: FailoverHow): string =>
  `3-node RabbitMQ cluster; the node the engine is connected to is stopped for good (${howSaid[how]}) under load`;

/** `urls` in cluster order, rotated so that node `first` (1-based) comes first. */
const listFrom = (urls: readonly string[], first: number): string => [...urls.slice(first - 1), ...urls.slice(0, first - 1)].join(',');

/**
 * `leftovers` receives a closer for everything the run opens, so a caller whose test timed out
 * (the run still waiting somewhere) can close what would otherwise keep reconnecting forever.
 */
export async function runClusterFailover(
  cluster: RabbitCluster,
  how: FailoverHow,
  dir: string,
  leftovers: Set<() => Promise<void>> = new Set(),
): Promise<ScenarioResult> {
  const name = `cluster failover (${how})`;
  const scenario: Scenario = {
    name,
    faults: clusterFailoverFaults(how),
    run: () => Promise.reject(new Error('run through runClusterFailover')),
  };
  const password = randomBytes(12).toString('hex');
  const engineUser = `converge-engine-${randomBytes(3).toString('hex')}`;
  await cluster.addAdmin(engineUser, password);
  const indices = cluster.nodes.map((n) => n.index);
  const engineUrls = indices.map((i) => cluster.urlOf(i, engineUser, password));
  const engine = await startEngineOverAmqp({
    url: engineUrls.join(','),
    storePath: join(dir, `${how}.db`),
    key: generateSigningKey(),
    logger,
    heartbeatSeconds: 2,
    // An inbox that survives its broker node's loss is a quorum one (--inbox-queue quorum): the
    // default classic inbox lives on one node, and this test stops the node the engine declared
    // it on (docs/operations.md).
    inbox: 'quorum',
  });
  leftovers.add(engine.stop);
  const nodes: NodeConn[] = [];
  try {
    const engineAt = cluster.nodeOfUrl(engine.transport.connection.connectedTo() ?? '');
    if (engineAt === null) throw new Error('the engine is connected to no node of the cluster');
    const survivors = indices.filter((i) => i !== engineAt.index);
    for (const [k, id] of nodeIds(`cf${how}`, 3).entries()) {
      await cluster.addNodeAccount(id, password);
      const first = k === 0 ? engineAt.index : survivors[(k - 1) % survivors.length]!;
      const url = listFrom(
        indices.map((i) => cluster.urlOf(i, id, password)),
        first,
      );
      const conn = await connectAmqp({ url, logger, topology: null, connectionName: `failover-node-${id}`, heartbeatSeconds: 2 });
      leftovers.add(conn.close);
      nodes.push({
        node: id,
        conn,
        link: createAmqpNodeLink(conn, { node: id, logger }),
        raw: (userId) => createAmqpNodeLink(conn, { node: id, logger, userId }),
      });
    }
    // The first node takes declarations, before and after the failover (the relay's publisher).
    const inbox = nodes[0]!;
    const received = new Set<string>();
    await engine.engine.send!(inbox.node, [{ id: 'web', image: 'web:1' }]);
    await inbox.link.consume(async (body) => {
      received.add(createHash('sha256').update(parseSigned(body).declaration).digest('hex'));
    });
    await until('the first declaration to reach its node', () => received.size === 1, 30_000);

    const load = startLoad(nodes, Infinity, 5);
    leftovers.add(async () => load.stop());
    await until('some load to flow', () => load.confirmed().size >= 150, 60_000);
    const generation = engine.transport.connection.generation();
    const nodeAt = nodes.map((n) => cluster.nodeOfUrl(n.conn.connectedTo() ?? '')?.index ?? null);

    const stopAt = Date.now();
    const stopping = cluster.stopNode(engineAt.index, how);
    // Reports confirmed before the engine lost its node may still be ingested through it; only one
    // confirmed after the loss proves ingest resumed elsewhere.
    await until(
      'the engine to lose its node',
      () => engine.transport.connection.generation() !== generation || !engine.transport.connection.isConnected(),
      { timeoutMs: 60_000, everyMs: 5 },
    );
    const lostAt = Date.now();
    const recovering = recoveryFrom(() => engine.store, load, true);
    await stopping;
    const stoppedAt = Date.now();
    const recoverMs = await recovering;
    const reconnectedTo = cluster.nodeOfUrl(engine.transport.connection.connectedTo() ?? '');

    // Keep the load on for a while after the failover, then send again: the relay must publish
    // through the new connection, and the node (if it was on the stopped node) must consume again.
    await sleep(1_000);
    const sent = await engine.engine.send!(inbox.node, [{ id: 'web', image: 'web:2' }]);
    const relayed = await until('the declaration sent after the failover to reach its node', () => received.has(sent.digest), 30_000).then(
      () => true,
      () => false,
    );
    load.finish();
    await load.done;
    await settleAll(() => engine.store, load);
    const nodesMoved = nodes.filter((n, k) => nodeAt[k] === engineAt.index && n.conn.connectedTo() !== null).length;
    const failoverMs = recoverMs === null ? null : lostAt - stopAt + recoverMs;
    return await tally(scenario, engine.store, load, failoverMs, {
      notes: [
        `engine on ${engineAt.name.replace(/@.*/, '')}, stopped by ${howSaid[how]}: connection lost ${lostAt - stopAt} ms after the stop began, node VM gone after ${stoppedAt - stopAt} ms; engine reconnected to ${reconnectedTo?.name.replace(/@.*/, '') ?? 'no node'}; time to recover = from the stop until every report confirmed before the loss and one confirmed after it are stored`,
        `${nodeAt.filter((i) => i === engineAt.index).length} of ${nodes.length} simulated nodes were on the stopped node and failed over through their own URL list (${nodesMoved} reconnected)`,
      ],
      checks: {
        engineFailedOver: reconnectedTo !== null && reconnectedTo.index !== engineAt.index,
        declarationRelayedAfterFailover: relayed,
      },
    });
  } finally {
    for (const n of nodes) {
      await n.link.close().catch(() => undefined);
      await n.conn.close().catch(() => undefined);
    }
    await engine.stop().catch(() => undefined);
  }
}

/** The scenario as `npm run faults` runs it: a cluster of its own, removed afterwards. */
export const clusterFailover = (how: FailoverHow): Scenario => ({
  name: `cluster failover (${how})`,
  faults: clusterFailoverFaults(how),
  run: async () => {
    const dir = mkdtempSync(join(tmpdir(), 'converge-failover-'));
    const cluster = await startRabbitCluster();
    try {
      return await runClusterFailover(cluster, how, dir);
    } finally {
      await cluster.remove();
      rmSync(dir, { recursive: true, force: true });
    }
  },
});
