import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRaceScanner, livenessAt, summarizeFleet } from '../../../projections/index.ts';
import { parseApiTokens } from '../../api/auth.ts';
import { generateSigningKey } from '../../declaration/index.ts';
import { loadConfig } from '../../app/config.ts';
import { createServer } from '../../app/server.ts';
import type { ServerTransport } from '../../app/server.ts';
import { ConvergeError } from '../../errors.ts';
import { connectServerTransport } from '../../app/amqp.ts';
import { createSimulatedNode } from '../../lab/simulatedNode.ts';
import type { SimulatedNode } from '../../lab/simulatedNode.ts';
import { createAmqpNodeLink } from '../../transport/amqpNodeLink.ts';
import { nodeQueueOf } from '../../transport/brokerNames.ts';
import { assertTopology, nodeTopology } from '../../transport/topology.ts';
import { createInProcessBroker } from '../../transport/inProcess.ts';
import type { NodeLink } from '../../transport/port.ts';
import type { Run } from '../command.ts';
import { openStore } from '../command.ts';
import { makeLogger } from '../logger.ts';
import { printJson } from '../output.ts';

// `converge demo` (DESIGN §6): the whole loop on one machine. A simulated fleet on the
// in-process broker (or RabbitMQ with --amqp), rounds of declarations, and a few nodes chosen
// to show every status: slow ones whose apply outlasts the gap between rounds (the seed's race:
// a report about round k lands after round k+1 was sent), one that refuses, one with a failing
// resource, one that goes silent. The API serves it all; a summary line per second shows it.

const int = (v: string | boolean | undefined, fallback: number, name: string): number => {
  if (v === undefined) return fallback;
  const n = Number(v);
  if (typeof v !== 'string' || !Number.isInteger(n) || n < 0)
    throw new ConvergeError('CONVERGE_ERR_USAGE', `--${name} must be a whole number ≥ 0`);
  return n;
};

export const run: Run = async ({ io, values, config: given, json }) => {
  const count = Math.max(5, int(values.nodes, 50, 'nodes'));
  const rounds = values.rounds === undefined ? null : int(values.rounds, 0, 'rounds');
  const duration = values.duration === undefined ? null : int(values.duration, 0, 'duration');
  const intervalMs = Math.max(100, int(values['interval-ms'], 3_000, 'interval-ms'));

  // Embedded defaults: a fresh SQLite file in a temp dir (each demo starts clean), a short grace
  // so the silent node is seen going away within the demo, and a token printed for the API.
  const explicitStore = values.store !== undefined || io.env['CONVERGE_STORE'] !== undefined;
  const dir = explicitStore ? null : mkdtempSync(join(tmpdir(), 'converge-demo-'));
  const config = loadConfig(
    { flags: { ...values, ...(dir === null ? {} : { store: `sqlite:${join(dir, 'converge.db')}` }) }, env: io.env },
    {
      logLevel: 'warn',
      graceMs: String(Math.max(3 * 1000, intervalMs)),
      aliveResolutionMs: '1000',
      trustMissingUserId: given.amqpUrl === null ? 'off' : 'on',
    },
  );
  let tokens = config.apiTokens;
  let token: string | null = null;
  if (tokens.size === 0) {
    token = randomBytes(18).toString('base64url');
    tokens = parseApiTokens(`${token}:read,send`).table;
  }
  const key = config.signingKey ?? generateSigningKey();
  const logger = makeLogger(config.logLevel);
  const store = await openStore(config, io, false);

  let amqp: Awaited<ReturnType<typeof connectServerTransport>> | null = null;
  let transport: ServerTransport;
  let linkOf: (node: string) => NodeLink;
  if (config.amqpUrl !== null) {
    amqp = await connectServerTransport(config.amqpUrl, logger, 'converge-demo');
    transport = amqp.transport;
    const conn = amqp.connection;
    // One broker account for the whole simulated fleet, so no user_id (trusted lab, DESIGN §1).
    linkOf = (node) => createAmqpNodeLink(conn, { node, logger, userId: null });
  } else {
    const broker = createInProcessBroker();
    transport = { ingestSource: broker.ingestSource(), publisher: broker.declarationPublisher() };
    linkOf = (node) => broker.nodeLink(node);
  }
  const ids = Array.from({ length: count }, (_, i) => `node-${String(i + 1).padStart(3, '0')}`);
  if (amqp !== null) {
    // A previous demo run (another key, another store) may have left declarations in these
    // inboxes; this run's nodes would refuse them as forged and the summary would count races
    // that never happened in this run. Declaring them afresh (as the relay would on first send)
    // lets the simulated nodes start consuming at once instead of retrying until round 1.
    const ch = await amqp.connection.createChannel();
    for (const id of ids) {
      await ch.deleteQueue(nodeQueueOf(id));
      await assertTopology(ch, nodeTopology(id));
    }
    await ch.close();
  }
  const engine = createServer({ config: { ...config, apiTokens: tokens }, logger, store, transport, key });
  // The cast: slow (apply outlasts a round: the race), one refusing, one degraded, one silent.
  const slow = new Set(ids.slice(0, Math.max(2, Math.floor(count / 12))));
  const refusing = ids[count - 1]!;
  const silentOne = ids[count - 2]!;
  const degradedOne = ids[count - 3]!;
  const nodes: SimulatedNode[] = ids.map((id) =>
    createSimulatedNode({
      link: linkOf(id),
      verifyingKey: key,
      logger,
      applyDelayMs: slow.has(id) ? Math.round(intervalMs * 1.5) : 20 + (id.charCodeAt(id.length - 1) % 7) * 15,
      aliveEveryMs: 500,
      refuse: id === refusing ? 'policy: this host does not run unsigned images' : null,
      ...(id === degradedOne ? { fail: { sidecar: 'image pull failed: 429 from registry' } } : {}),
    }),
  );
  const scanner = createRaceScanner();
  let races = 0;
  engine.runner.readModel.onChange((c) => {
    if (scanner.push(c.event) !== null) races++;
  });

  const url = await engine.start();
  // Not awaited one by one: on RabbitMQ a node's inbox exists only once the engine first
  // publishes to it (the engine declares it, DESIGN §1), so a node's consume waits for round 1.
  const starting = Promise.allSettled(nodes.map((n) => n.start()));
  const where = dir === null ? config.store : `sqlite:${join(dir, 'converge.db')}`;
  io.stderr(
    [
      `converge demo: ${count} nodes (${slow.size} slow, ${refusing} refuses, ${degradedOne} degraded, ${silentOne} goes silent) on ${config.amqpUrl === null ? 'the in-process broker' : 'RabbitMQ'}`,
      ...(engine.dashboard ? [`dashboard ${url}/  (paste the token below when it asks)`] : []),
      `API ${url}  (Authorization: Bearer ${token ?? '<one of CONVERGE_API_TOKENS>'})  OpenAPI ${url}/v1/openapi.json`,
      `store ${where}   afterwards: converge forensics races --store ${where}`,
      '',
    ].join('\n'),
  );

  const summary = (): Record<string, unknown> => {
    const now = Date.now();
    const states = [...engine.runner.readModel.nodes()].map((s) => {
      const ls = engine.ingest?.lastSeenAt(s.node);
      return ls !== null && ls !== undefined && (s.lastSeenAt === null || ls.getTime() > Date.parse(s.lastSeenAt))
        ? { ...s, lastSeenAt: ls.toISOString() }
        : s;
    });
    const f = summarizeFleet(states, now, config.graceMs);
    return { round, ...f.byStatus, ...f.byLiveness, races, p50Ms: f.convergence.p50Ms, p99Ms: f.convergence.p99Ms };
  };
  const line = (s: Record<string, unknown>): string =>
    `round ${String(s.round)}${rounds === null ? '' : `/${rounds}`}  behind ${String(s.behind)}  converged ${String(s.converged)}  degraded ${String(s.degraded)}  refused ${String(s.refused)}  |  connected ${String(s.connected)}  disconnected ${String(s.disconnected)}  |  races ${String(s.races)}  p50 ${String(s.p50Ms ?? '-')} ms`;
  const show = (): void => {
    const s = summary();
    if (json) printJson(io, s);
    else io.stdout(io.stderrIsTTY ? `\r${line(s)}\u001b[K` : `${line(s)}\n`);
  };

  let round = 0;
  const started = Date.now();
  const ticker = setInterval(show, 1_000);
  const stop = new Promise<void>((resolve) => {
    void io.interrupted.then(resolve);
    if (duration !== null) setTimeout(resolve, duration).unref();
  });
  let stopped = false;
  void stop.then(() => (stopped = true));
  try {
    while (!stopped && (rounds === null || round < rounds)) {
      round++;
      await Promise.all(
        ids.map((id) =>
          engine.send!(id, [
            { id: 'web', image: `registry.local/web:${round}` },
            { id: 'sidecar', image: 'registry.local/envoy:1' },
          ]),
        ),
      );
      if (round === 2) nodes[ids.indexOf(silentOne)]!.setSilent(true);
      await Promise.race([stop, new Promise((r) => setTimeout(r, intervalMs))]);
    }
    // Let the last round land (the slow nodes need 1.5 intervals) unless the user stopped us.
    if (!stopped) await Promise.race([io.interrupted, new Promise((r) => setTimeout(r, intervalMs * 2))]);
    clearInterval(ticker);
    const final = summary();
    if (json) printJson(io, { final: true, ...final, elapsedMs: Date.now() - started });
    else io.stdout(`${io.stderrIsTTY ? '\r' : ''}${line(final)}\n`);
    const silentState = engine.runner.readModel.get(silentOne);
    if (silentState !== undefined && !json) {
      io.stderr(
        `${silentOne}: ${silentState.status}, ${livenessAt(engine.ingest?.lastSeenAt(silentOne)?.toISOString() ?? silentState.lastSeenAt, Date.now(), config.graceMs).state}\n`,
      );
    }
  } finally {
    clearInterval(ticker);
    await Promise.race([starting, new Promise((r) => setTimeout(r, 2_000))]);
    await Promise.all(nodes.map((n) => n.stop()));
    await engine.stop();
    if (amqp === null) await transport.publisher.close();
    else await amqp.close();
    await store.close();
  }
  return 0;
};
