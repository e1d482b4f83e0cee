import type { Logger } from 'pino';
import { createRaceScanner, livenessAt, summarizeFleet } from '../../projections/index.ts';
import type { LivenessState, NodeStatus } from '../../projections/index.ts';
import type { SigningKey } from '../core/declaration/index.ts';
import { createSimulatedNode } from '../simulation/simulatedNode.ts';
import type { SimulatedNode } from '../simulation/simulatedNode.ts';
import { withExactLastSeen } from '../readModel/queries.ts';
import { sleep } from '../retry.ts';
import type { EventStore } from '../store/index.ts';
import { createAmqpNodeLink } from '../transport/amqpNodeLink.ts';
import { nodeQueueOf } from '../transport/brokerNames.ts';
import { createInProcessBroker } from '../transport/inProcess.ts';
import type { NodeLink } from '../transport/port.ts';
import { assertTopology, nodeTopology } from '../transport/topology.ts';
import { connectServerTransport } from './amqp.ts';
import type { Config } from './config.ts';
import { startRollout } from '../engine/rolloutCommands.ts';
import type { StartedRollout } from '../engine/rolloutCommands.ts';
import { createServer } from './server.ts';
import type { Server, ServerTransport } from './server.ts';

// The demo fleet (docs/design.md §6): the whole loop on one machine. A simulated fleet on the in-process
// broker (or RabbitMQ), rounds of declarations, and a cast chosen to show every status: slow nodes
// whose apply outlasts the gap between rounds (the seed's race: a report about round k lands after
// round k+1 was sent), one that refuses, one with a failing resource, one that goes silent. This is
// the wiring; `converge demo` (src/cli/commands/demo.ts) reads its flags and prints what it does.

export type DemoOptions = Readonly<{
  /** Validated configuration; with `amqpUrl` the fleet runs over RabbitMQ, else the in-process broker. */
  config: Config;
  logger: Logger;
  store: EventStore;
  key: SigningKey;
  nodes: number;
  intervalMs: number;
}>;

export type DemoCast = Readonly<{ slow: readonly string[]; refusing: string; degraded: string; silent: string }>;

export type DemoSummary = Readonly<
  Record<NodeStatus | LivenessState, number> & { races: number; p50Ms: number | null; p99Ms: number | null }
>;

export type Demo = Readonly<{
  server: Server;
  ids: readonly string[];
  cast: DemoCast;
  /** Start the engine and the simulated nodes; resolves with the API's URL. */
  start: () => Promise<string>;
  /** Send round `round` to every node (the silent node goes quiet after round 2). */
  sendRound: (round: number) => Promise<void>;
  /**
   * Roll round `round`'s spec out to the whole fleet in waves instead: the engine's
   * driver sends each wave once the one before has read its declaration, and halts on the
   * refusing node and the degraded one when they exceed the failure budget.
   */
  rollout: (round: number, plan?: Readonly<{ waves?: string; maxFailures?: string; waveTimeoutMs?: number }>) => Promise<StartedRollout>;
  summary: () => DemoSummary;
  /** Every node but the silent one has answered the latest round sent (no node is `behind`). */
  settled: () => boolean;
  /** The silent node's status and liveness, for the last line. */
  silentState: () => { status: NodeStatus; liveness: LivenessState } | null;
  stop: () => Promise<void>;
}>;

/** What round `round` sends every node. */
const roundSpec = (round: number) => [
  { id: 'web', image: `registry.local/web:${round}` },
  { id: 'sidecar', image: 'registry.local/envoy:1' },
];

/** Node ids of a demo fleet: node-001, node-002, … */
export const demoNodeIds = (count: number): string[] => Array.from({ length: count }, (_, i) => `node-${String(i + 1).padStart(3, '0')}`);

export async function createDemo(options: DemoOptions): Promise<Demo> {
  const { config, logger, store, key, intervalMs } = options;
  const ids = demoNodeIds(options.nodes);

  let amqp: Awaited<ReturnType<typeof connectServerTransport>> | null = null;
  let transport: ServerTransport;
  let linkOf: (node: string) => NodeLink;
  if (config.amqpUrl !== null) {
    amqp = await connectServerTransport(config.amqpUrl, logger, 'converge-demo', {
      inbox: config.inboxQueue,
      inboxDeclareRate: config.inboxDeclareRate,
    });
    transport = amqp.transport;
    const conn = amqp.connection;
    // One broker account for the whole simulated fleet, so no user_id (trusted lab, docs/design.md §1).
    linkOf = (node) => createAmqpNodeLink(conn, { node, logger, userId: null });
    // A previous demo run (another key, another store) may have left declarations in these
    // inboxes; this run's nodes would refuse them as forged and the summary would count races
    // that never happened in this run. Declaring them afresh (as the relay would on first send)
    // lets the simulated nodes start consuming at once instead of retrying until round 1.
    const ch = await conn.createChannel();
    for (const id of ids) {
      await ch.deleteQueue(nodeQueueOf(id));
      await assertTopology(ch, nodeTopology(id, config.inboxQueue));
    }
    await ch.close();
  } else {
    const broker = createInProcessBroker();
    transport = { ingestSource: broker.ingestSource(), publisher: broker.declarationPublisher() };
    linkOf = (node) => broker.nodeLink(node);
  }

  const server = createServer({ config, logger, store, transport, key });
  const send = server.send;
  if (send === null) throw new Error('the demo server has a signing key, so it can send');
  const count = ids.length;
  const cast: DemoCast = {
    slow: ids.slice(0, Math.max(2, Math.floor(count / 12))),
    refusing: ids[count - 1]!,
    silent: ids[count - 2]!,
    degraded: ids[count - 3]!,
  };
  const slow = new Set(cast.slow);
  const nodes: SimulatedNode[] = ids.map((id) =>
    createSimulatedNode({
      link: linkOf(id),
      verifyingKey: key,
      logger,
      applyDelayMs: slow.has(id) ? Math.round(intervalMs * 1.5) : 20 + (id.charCodeAt(id.length - 1) % 7) * 15,
      aliveEveryMs: 500,
      refuse: id === cast.refusing ? 'policy: this host does not run unsigned images' : null,
      ...(id === cast.degraded ? { fail: { sidecar: 'image pull failed: 429 from registry' } } : {}),
    }),
  );

  // Races as they happen: the old clock rule beside the digest rule, fed by the read model.
  const scanner = createRaceScanner();
  let races = 0;
  server.runner.readModel.onChange((c) => {
    if (scanner.push(c.event) !== null) races++;
  });

  const exact = (node: string): Date | null => server.ingest?.lastSeenAt(node) ?? null;
  let starting: Promise<unknown> = Promise.resolve();

  return {
    server,
    ids,
    cast,
    async start() {
      const url = await server.start();
      // Not awaited one by one: on RabbitMQ a node's inbox exists only once the engine first
      // publishes to it (the engine declares it, docs/design.md §1), so a node's consume waits for round 1.
      starting = Promise.allSettled(nodes.map((n) => n.start()));
      return url;
    },
    async sendRound(round) {
      await Promise.all(ids.map((id) => send(id, roundSpec(round))));
      if (round === 2) nodes[ids.indexOf(cast.silent)]!.setSilent(true);
    },
    async rollout(round, plan = {}) {
      const started = await startRollout(server.rolloutDeps, {
        rollout: `demo-round-${round}-${Date.now().toString(36)}`,
        resources: roundSpec(round),
        selection: { kind: 'all' },
        waves: plan.waves ?? '1,10%,50%,100%',
        maxFailures: plan.maxFailures ?? '1',
        waveTimeoutMs: plan.waveTimeoutMs ?? Math.max(10_000, intervalMs * 4),
        startedBy: 'demo',
      });
      server.rollouts?.wake();
      return started;
    },
    summary() {
      const states = [...server.runner.readModel.nodes()].map((s) => withExactLastSeen(s, exact(s.node)));
      const f = summarizeFleet(states, Date.now(), config.graceMs);
      return { ...f.byStatus, ...f.byLiveness, races, p50Ms: f.convergence.p50Ms, p99Ms: f.convergence.p99Ms };
    },
    settled() {
      const answered = new Set<string | undefined>(['converged', 'refused', 'degraded']);
      return ids.every((id) => id === cast.silent || answered.has(server.runner.readModel.get(id)?.status));
    },
    silentState() {
      const s = server.runner.readModel.get(cast.silent);
      if (s === undefined) return null;
      return { status: s.status, liveness: livenessAt(withExactLastSeen(s, exact(s.node)).lastSeenAt, Date.now(), config.graceMs).state };
    },
    async stop() {
      const started = new AbortController();
      await Promise.race([starting.finally(() => started.abort()), sleep(2_000, started.signal)]);
      await Promise.all(nodes.map((n) => n.stop()));
      await server.stop();
      if (amqp === null) await transport.publisher.close();
      else await amqp.close();
    },
  };
}
