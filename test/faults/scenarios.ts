import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import fc from 'fast-check';
import { createFaultProxy } from '../support/faults/faultProxy.ts';
import { hostileBodies } from '../support/faults/hostileBodies.ts';
import { startIngestOverAmqp } from '../support/faults/ingestOverAmqp.ts';
import type { IngestOverAmqp } from '../support/faults/ingestOverAmqp.ts';
import { mountTinyTmpfs } from '../support/faults/tinyTmpfs.ts';
import { withStoreFaults } from '../support/faults/withStoreFaults.ts';
import { createProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import { compareStates, replayStore } from '../../src/readModel/replay.ts';
import { readSnapshot } from '../../src/readModel/snapshot/snapshotFile.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { connectAmqp } from '../../src/transport/amqpConnection.ts';
import type { AmqpConnection } from '../../src/transport/amqpConnection.ts';
import { createAmqpNodeLink } from '../../src/transport/amqpNodeLink.ts';
import type { InboundKind, NodeLink } from '../../src/transport/port.ts';
import { encodeReport } from '../../src/core/wire/index.ts';
import { createBrokerLab, defaultBroker, describeOnBroker } from '../support/broker.ts';
import type { BrokerLab } from '../support/broker.ts';
import { killHard, startFaultChild, stopGently } from '../support/faults/faultChild.ts';
import { logger } from '../support/logger.ts';
import { sleep, until } from '../support/until.ts';

// Fault scenarios against the real broker and the real ingest (src/engine/ingest/ over
// src/transport), shared by test/faults/*.fault.test.ts (which assert lost = duplicated =
// hostile appended = 0) and test/faults/report.ts (which writes RELIABILITY.md).
//
// Every scenario: a fresh vhost, real node accounts (so RabbitMQ validates user_id), nodes that
// publish reports with stable message ids and retry until the broker confirms (as the Go node
// does), the engine ingesting into SQLite, a fault while that runs, then the tally: every
// confirmed report must be stored exactly once.

export type ScenarioResult = {
  scenario: string;
  faults: string;
  sent: number;
  confirmed: number;
  stored: number;
  lost: number;
  duplicated: number;
  hostileTried: number;
  hostileAppended: number;
  /** From the end of the last fault to every confirmed report stored; null if it never recovered. */
  recoverMs: number | null;
  notes: string[];
  /** Scenario-specific facts that must hold (tests assert every one is true). */
  checks: Record<string, boolean>;
};

export type Scenario = Readonly<{ name: string; faults: string; run: (lab: FaultLab) => Promise<ScenarioResult> }>;

/**
 * The result of a scenario that changes a finished log (or a bundle of it) instead of running an
 * engine: every event written is stored and none lost or duplicated, there is nothing to recover,
 * hostile tried counts the changes made and hostile appended those not found.
 */
export const auditScenarioResult = (
  scenario: Pick<Scenario, 'name' | 'faults'>,
  r: Readonly<{ events: number; tried: number; missed: number; notes: string[]; checks: Record<string, boolean> }>,
): ScenarioResult => ({
  scenario: scenario.name,
  faults: scenario.faults,
  sent: r.events,
  confirmed: r.events,
  stored: r.events,
  lost: 0,
  duplicated: 0,
  hostileTried: r.tried,
  hostileAppended: r.missed,
  recoverMs: null,
  notes: r.notes,
  checks: r.checks,
});

/** Each scenario runs in a broker lab of its own (test/support/broker.ts). */
export type FaultLab = BrokerLab;
export const createFaultLab = createBrokerLab;

// ---------------------------------------------------------------- nodes

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

// ---------------------------------------------------------------- engine

export const startEngine = (url: string, store: EventStore, heartbeatSeconds = 2): Promise<IngestOverAmqp> =>
  startIngestOverAmqp({ url, store, logger, heartbeatSeconds, connectionName: 'converge-fault-engine' });

// ---------------------------------------------------------------- tally

export type Stored = { reports: Map<string, number>; aliveByStream: Map<string, number>; reportsByStream: Map<string, number> };

export async function readStored(store: EventStore): Promise<Stored> {
  const reports = new Map<string, number>();
  const aliveByStream = new Map<string, number>();
  const reportsByStream = new Map<string, number>();
  for await (const batch of store.readAll()) {
    for (const e of batch) {
      if (e.type === 'ReportReceived') {
        const id = e.data.transport.messageId ?? `(no id)/${e.id}`;
        reports.set(id, (reports.get(id) ?? 0) + 1);
        reportsByStream.set(e.stream, (reportsByStream.get(e.stream) ?? 0) + 1);
      } else if (e.type === 'AliveSeen') aliveByStream.set(e.stream, (aliveByStream.get(e.stream) ?? 0) + 1);
    }
  }
  return { reports, aliveByStream, reportsByStream };
}

const allStored = async (store: EventStore, ids: Iterable<string>): Promise<boolean> => {
  const { reports } = await readStored(store);
  for (const id of ids) if (!reports.has(id)) return false;
  return true;
};

/**
 * Wait until every confirmed report (by message id) is stored, so a tally counts losses, not lag:
 * the time from now until it was, or null if that did not happen within the limit. The one wait
 * of every fault scenario.
 */
export async function timeToStore(store: () => EventStore, ids: Iterable<string>, limitMs = 60_000): Promise<number | null> {
  const t0 = Date.now();
  const snapshot = [...ids];
  try {
    // Each poll reads the whole store: poll gently.
    await until('every confirmed report to be stored', () => allStored(store(), snapshot), { timeoutMs: limitMs, everyMs: 50 });
    return Date.now() - t0;
  } catch {
    return null;
  }
}

/**
 * Start timing recovery now (just after a fault, or just after it was lifted): resolves with the
 * time until every report confirmed before this moment is stored and, for an instant fault (reset,
 * close, kill), one confirmed after it is stored too — that needs the engine working again
 * (reconnected, restarted), not a backlog that happened to land before the fault. Runs alongside
 * the rest of the load.
 */
export async function recoveryFrom(store: () => EventStore, load: Load, instant: boolean, limitMs = 60_000): Promise<number | null> {
  const t0 = Date.now();
  const before = new Set(load.confirmed());
  try {
    await until(
      'the engine to recover',
      async () => {
        const { reports } = await readStored(store());
        for (const id of before) if (!reports.has(id)) return false;
        // After a lifted fault (blackhole, store down, disk full) nothing could be stored during
        // it, so the backlog alone proves recovery; an instant fault needs a report from after it.
        if (!instant) return true;
        for (const id of reports.keys()) if (!before.has(id)) return true;
        return false;
      },
      { timeoutMs: limitMs, everyMs: 20 },
    );
    return Date.now() - t0;
  } catch {
    return null;
  }
}

/** After the load: wait (bounded) for every confirmed report, so the tally counts losses, not lag. */
export const settleAll = async (store: () => EventStore, load: Load): Promise<void> => {
  await timeToStore(store, load.confirmed());
};

/** Of the confirmed report ids, how many are stored, missing, and stored more than once (the extra copies). */
export function countStored(
  reports: ReadonlyMap<string, number>,
  confirmed: Iterable<string>,
): Pick<ScenarioResult, 'stored' | 'lost' | 'duplicated'> {
  let stored = 0;
  let lost = 0;
  let duplicated = 0;
  for (const id of confirmed) {
    const n = reports.get(id) ?? 0;
    if (n === 0) lost++;
    else stored++;
    if (n > 1) duplicated += n - 1;
  }
  return { stored, lost, duplicated };
}

export async function tally(
  scenario: Scenario,
  store: EventStore,
  load: Load,
  recoverMs: number | null,
  extra: Partial<ScenarioResult> = {},
): Promise<ScenarioResult> {
  const { reports } = await readStored(store);
  const confirmed = load.confirmed();
  return {
    scenario: scenario.name,
    faults: scenario.faults,
    sent: load.sent(),
    confirmed: confirmed.size,
    ...countStored(reports, confirmed),
    hostileTried: 0,
    hostileAppended: 0,
    recoverMs,
    notes: [],
    checks: {},
    ...extra,
  };
}

// ---------------------------------------------------------------- scenarios

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

export const baseline: Scenario = {
  name: 'baseline',
  faults: 'none',
  run: (lab) =>
    withNodes(lab, 'base', 3, async (nodes) => {
      const store = createSqliteEventStore(join(lab.dir, 'baseline.db'));
      const engine = await startEngine(lab.engineUrl, store);
      try {
        const load = startLoad(nodes, PER_NODE, PACE_MS);
        await load.done;
        const recover = await timeToStore(() => store, load.confirmed());
        return await tally(baseline, store, load, recover);
      } finally {
        await engine.stop();
        await store.close();
      }
    }),
};

export const proxyReset: Scenario = {
  name: 'proxy reset',
  faults: 'engine↔broker TCP reset (RST) 3× under load',
  run: (lab) =>
    withNodes(lab, 'rst', 3, async (nodes) => {
      const proxy = await createFaultProxy({
        target: { host: new URL(defaultBroker.amqpUrl).hostname, port: Number(new URL(defaultBroker.amqpUrl).port || 5672) },
      });
      const store = createSqliteEventStore(join(lab.dir, 'reset.db'));
      const engine = await startEngine(proxy.rewrite(lab.engineUrl), store);
      try {
        // Load runs until recovery is measured: recovery needs a report confirmed after the last
        // reset, and a fixed load may be spent by then on a slow machine.
        const load = startLoad(nodes, Infinity, PACE_MS);
        let resets = 0;
        for (let i = 0; i < 3; i++) {
          await until('some load to flow', () => load.confirmed().size >= ((i + 1) * PER_NODE * nodes.length) / 8, 60_000);
          await until('the engine to reconnect', () => engine.connection.isConnected() && engine.connection.generation() === i + 1, 30_000);
          resets += proxy.reset();
        }
        const recover = await recoveryFrom(() => store, load, true);
        await until('the planned load to be confirmed', () => load.confirmed().size >= PER_NODE * nodes.length);
        load.finish();
        await load.done;
        await settleAll(() => store, load);
        await until('the engine to reconnect after the last reset', () => engine.connection.generation() >= 4, 30_000).catch(
          () => undefined,
        );
        const reconnected = engine.connection.generation() - 1;
        return await tally(proxyReset, store, load, recover, {
          notes: [`${resets} connection(s) reset; engine reconnected ${reconnected}×`],
          checks: { engineReconnected: reconnected >= 3 },
        });
      } finally {
        await engine.stop();
        await store.close();
        await proxy.close();
      }
    }),
};

export const proxyBlackhole: Scenario = {
  name: 'proxy blackhole',
  faults: 'engine↔broker blackholed 5 s (no FIN/RST; heartbeat 1 s) under load',
  run: (lab) =>
    withNodes(lab, 'bh', 3, async (nodes) => {
      const u = new URL(defaultBroker.amqpUrl);
      const proxy = await createFaultProxy({ target: { host: u.hostname, port: Number(u.port || 5672) } });
      const store = createSqliteEventStore(join(lab.dir, 'blackhole.db'));
      const engine = await startEngine(proxy.rewrite(lab.engineUrl), store, 1);
      try {
        const load = startLoad(nodes, PER_NODE, PACE_MS);
        await until('some load to flow', () => load.confirmed().size >= (PER_NODE * nodes.length) / 4);
        const gen = engine.connection.generation();
        proxy.blackhole();
        const noticed = await until('the engine to notice the dead link', () => !engine.connection.isConnected(), 15_000).then(
          () => true,
          () => false,
        );
        await sleep(5_000);
        proxy.pass();
        const recovering = recoveryFrom(() => store, load, false);
        await load.done;
        const recover = await recovering;
        await settleAll(() => store, load);
        const reconnected = engine.connection.generation() - gen;
        return await tally(proxyBlackhole, store, load, recover, {
          notes: [
            `engine ${noticed ? 'noticed the blackhole through heartbeats' : 'did NOT notice the blackhole'}; reconnected ${reconnected}×`,
          ],
          checks: { engineNoticedBlackhole: noticed, engineReconnected: reconnected >= 1 },
        });
      } finally {
        await engine.stop();
        await store.close();
        await proxy.close();
      }
    }),
};

// `rabbitmqctl close_all_connections` takes 2–5 s on a busy machine (it starts an Erlang VM before
// it closes anything), so the scenario takes that long too, always: a fixed load could finish
// before the last close, leaving no report to prove recovery with.
const CLOSE_DELAY_MS = Number(process.env['CONVERGE_FAULT_CLOSE_DELAY_MS'] ?? 2_000);

export const closeAllConnections: Scenario = {
  name: 'broker closes all connections',
  faults: 'rabbitmqctl close_all_connections for the vhost (engine and nodes) 3× under load',
  run: (lab) =>
    withNodes(lab, 'cac', 3, async (nodes) => {
      const store = createSqliteEventStore(join(lab.dir, 'closeall.db'));
      const engine = await startEngine(lab.engineUrl, store);
      try {
        // Load runs until recovery is measured (as in the SIGKILL scenario): recovery needs a report
        // confirmed after the last close, and the closes take seconds.
        const load = startLoad(nodes, Infinity, PACE_MS);
        let closed = 0;
        for (let i = 0; i < 3; i++) {
          await until('some load to flow', () => load.confirmed().size >= ((i + 1) * PER_NODE * nodes.length) / 8);
          // Each close must meet a fresh engine connection, not the one the last close just killed.
          await until('the engine to reconnect', () => engine.connection.isConnected() && engine.connection.generation() === i + 1, 30_000);
          await sleep(CLOSE_DELAY_MS);
          closed += await lab.closeAllConnections();
        }
        const recover = await recoveryFrom(() => store, load, true);
        await until('the planned load to be confirmed', () => load.confirmed().size >= PER_NODE * nodes.length);
        load.finish();
        await load.done;
        await settleAll(() => store, load);
        const reconnectedAfterLast = await until(
          'the engine to reconnect after the last close',
          () => engine.connection.generation() >= 4,
          30_000,
        ).then(
          () => true,
          () => false,
        );
        return await tally(closeAllConnections, store, load, recover, {
          notes: [`${closed} connection(s) closed by the broker`],
          checks: { everyConnectionClosed: closed >= 3 * (nodes.length + 1), engineReconnected: reconnectedAfterLast },
        });
      } finally {
        await engine.stop();
        await store.close();
      }
    }),
};

export const storeUnavailable: Scenario = {
  name: 'store unavailable',
  faults: 'appends fail (STORE_UNAVAILABLE) for 3 s, then 5 appends whose ack is lost after writing',
  run: (lab) =>
    withNodes(lab, 'st', 3, async (nodes) => {
      const inner = createSqliteEventStore(join(lab.dir, 'store.db'));
      const store = withStoreFaults(inner);
      const engine = await startEngine(lab.engineUrl, store);
      try {
        const load = startLoad(nodes, PER_NODE, PACE_MS);
        await until('some load to flow', () => load.confirmed().size >= (PER_NODE * nodes.length) / 4);
        store.faults.failAppends(true);
        await until('ingest to report the store unhealthy', () => !engine.ingest.isHealthy(), 10_000);
        await sleep(3_000);
        store.faults.failAppends(false);
        store.faults.loseAppendAcks(5);
        const recovering = recoveryFrom(() => inner, load, false);
        await load.done;
        const recover = await recovering;
        await settleAll(() => inner, load);
        const c = store.faults.counters();
        return await tally(storeUnavailable, inner, load, recover, {
          notes: [
            `${c.appendsFailed} append(s) failed, ${c.appendAcksLost} ack(s) lost after writing (each lost ack costs the ingest one retry backoff)`,
          ],
          checks: { appendsFailed: c.appendsFailed > 0, acksLost: c.appendAcksLost === 5, ingestHealthyAgain: engine.ingest.isHealthy() },
        });
      } finally {
        await engine.stop();
        await store.close();
      }
    }),
};

export const diskFull: Scenario = {
  name: 'disk full (tmpfs)',
  faults: 'SQLite on a 192 KiB tmpfs fills up (SQLITE_FULL); then remounted at 64 MiB',
  run: async (lab) => {
    const fs = mountTinyTmpfs(192);
    if ('unavailable' in fs) {
      return {
        scenario: diskFull.name,
        faults: diskFull.faults,
        sent: 0,
        confirmed: 0,
        stored: 0,
        lost: 0,
        duplicated: 0,
        hostileTried: 0,
        hostileAppended: 0,
        recoverMs: null,
        notes: [`skipped: ${fs.unavailable}`],
        checks: {},
      };
    }
    try {
      return await withNodes(lab, 'full', 3, async (nodes) => {
        const store = createSqliteEventStore(join(fs.dir, 'events.db'));
        const engine = await startEngine(lab.engineUrl, store);
        try {
          const load = startLoad(nodes, PER_NODE * 3, 0);
          const filled = await until('the disk to fill and ingest to hold', () => !engine.ingest.isHealthy(), 60_000).then(
            () => true,
            () => false,
          );
          await sleep(1_000);
          await promisify(execFile)('mount', ['-o', 'remount,size=64m', fs.dir]);
          const recovering = recoveryFrom(() => store, load, false);
          await load.done;
          const recover = await recovering;
          await settleAll(() => store, load);
          return await tally(diskFull, store, load, recover, {
            notes: [
              filled ? 'ingest held deliveries unacked while the disk was full (SQLITE_FULL)' : 'the disk never filled (load too small)',
            ],
            checks: { diskFilled: filled, ingestHealthyAgain: engine.ingest.isHealthy() },
          });
        } finally {
          await engine.stop();
          await store.close();
        }
      });
    } finally {
      fs.unmount();
    }
  },
};

/** Kills per SIGKILL run: at least 20 in CI; more with CONVERGE_FAULT_KILLS. */
export const sigkillCount = (): number => Math.max(1, Number(process.env['CONVERGE_FAULT_KILLS'] ?? 20));

/** The seed for seeded fault schedules: CONVERGE_FAULT_SEED replays a run; otherwise a fresh one, printed. */
export function faultSeed(what: string): number {
  const given = process.env['CONVERGE_FAULT_SEED'];
  const seed = given !== undefined && given !== '' ? Number(given) : (Date.now() ^ (Math.random() * 0x7fffffff)) | 0;
  process.stderr.write(`faults: ${what}: seed ${seed} (replay with CONVERGE_FAULT_SEED=${seed})\n`);
  return seed;
}

export const engineSigkill: Scenario = {
  name: 'engine SIGKILL',
  faults: `engine process (ingest + projections with snapshots, as \`serve\`) SIGKILLed ${sigkillCount()}× at seeded random moments under load, restarted each time`,
  run: (lab) =>
    withNodes(lab, 'kill', 3, async (nodes) => {
      const path = join(lab.dir, 'sigkill.db');
      const snapshotPath = `${path}.snapshot.json`;
      const kills = sigkillCount();
      const seed = faultSeed('engine SIGKILL');
      // When each kill lands: this long after the restarted engine said it was consuming (0 ms
      // included: a kill during the first fetch, before a batch was written or acked).
      const dwellMs = fc.sample(fc.integer({ min: 0, max: 400 }), { numRuns: kills, seed });
      const spawnChild = (): Promise<ChildProcess> =>
        startFaultChild('./ingestChild.ts', {
          CONVERGE_FAULT_AMQP_URL: lab.engineUrl,
          CONVERGE_FAULT_STORE: path,
          CONVERGE_FAULT_SNAPSHOT: snapshotPath,
          CONVERGE_FAULT_SNAPSHOT_EVERY: '250',
        });
      let child = await spawnChild();
      const reader = createSqliteEventStore(path);
      let killed = 0;
      try {
        // Load runs until the last restart, so every kill lands mid-stream.
        const load = startLoad(nodes, Infinity, PACE_MS);
        let recovering: Promise<number | null> = Promise.resolve(null);
        await until('some load to flow', () => load.confirmed().size >= 3 * nodes.length);
        for (const dwell of dwellMs) {
          await sleep(dwell);
          await killHard(child);
          killed++;
          // Recovery counts the restart itself: from the kill to every confirmed report stored.
          recovering = recoveryFrom(() => reader, load, true);
          child = await spawnChild();
        }
        // Give the last restart a report confirmed after it, then end the load.
        const n = load.confirmed().size;
        await until('load to flow after the last restart', () => load.confirmed().size >= n + nodes.length);
        load.finish();
        await load.done;
        const recover = await recovering;
        await settleAll(() => reader, load);
        // The last engine dies as the others did, so the snapshot left is one a kill left.
        await killHard(child);
        // As `serve` starts after a crash: restore the snapshot the killed engines left, follow
        // the store to its head; then a replay from zero must hold exactly the same states.
        const snapshot = await readSnapshot(snapshotPath).catch(() => null);
        const runner = createProjectionRunner({ store: reader, logger, snapshot: { path: snapshotPath, everyEvents: 1_000_000 } });
        await runner.start();
        await runner.caughtUp();
        const head = await reader.headPosition();
        await until('the read model to reach the store head', () => runner.readModel.position() === head, 30_000);
        const replayed = await replayStore(reader);
        const differences = compareStates(replayed, runner.readModel.nodes());
        await runner.stop();
        return await tally(engineSigkill, reader, load, recover, {
          notes: [
            `seed ${seed}; ${killed} SIGKILLs, each followed by a restart, and a last one before the check (dwell after restart ${Math.min(...dwellMs)}–${Math.max(...dwellMs)} ms); unacked deliveries were redelivered to each restart and stored once by event id`,
            `read model from ${snapshot === null ? 'zero (no snapshot)' : `the snapshot at position ${snapshot.position}`} followed to position ${head ?? 'none'} vs replay from zero: ${differences.length} difference(s) over ${replayed.size} node(s)${differences.length === 0 ? '' : ` — first: ${JSON.stringify(differences[0])}`}`,
          ],
          checks: {
            killedEveryTime: killed === kills && kills >= 1,
            readModelEqualsReplay: differences.length === 0 && replayed.size === nodes.length,
          },
        });
      } finally {
        await stopGently(child);
        await reader.close();
      }
    }),
};

export const hostileOverBroker: Scenario = {
  name: 'hostile input over the broker',
  faults: 'hostile bodies (fast-check), reports with no user_id, and reports naming another node, mixed with valid load',
  run: (lab) =>
    withNodes(lab, 'hx', 2, async (nodes) => {
      const [a, b] = nodes as [NodeConn, NodeConn];
      const store = createSqliteEventStore(join(lab.dir, 'hostile.db'));
      const engine = await startEngine(lab.engineUrl, store);
      const noUserId = a.raw(null);
      try {
        const load = startLoad([a, b], PER_NODE / 2, PACE_MS);
        const hostile = fc.sample(
          hostileBodies().filter((h) => h.mustReject),
          { numRuns: 300, seed: 7 },
        );
        let tried = 0;
        const stop = () => false;
        for (const [i, h] of hostile.entries()) {
          tried++;
          await publishUntilConfirmed(a.link, h.message, h.body, `hostile/${i}`, stop);
        }
        // Valid bodies the engine must still refuse: no user_id (the broker lets it through), and
        // a body naming node b sent by node a (user_id a).
        for (let i = 0; i < 25; i++) {
          tried += 2;
          await publishUntilConfirmed(
            noUserId,
            'report',
            encodeReport({ node: a.node, applied: [], failed: {}, refused: '', carried: [], declared: null }),
            `hostile/nouser/${i}`,
            stop,
          );
          await publishUntilConfirmed(
            a.link,
            'report',
            encodeReport({ node: b.node, applied: [], failed: {}, refused: '', carried: [], declared: null }),
            `hostile/mismatch/${i}`,
            stop,
          );
        }
        await load.done;
        const recover = await timeToStore(() => store, load.confirmed());
        await until('every hostile message to be dead-lettered', () => engine.ingest.stats().deadLettered >= tried, 60_000).catch(
          () => undefined,
        );
        const stored = await readStored(store);
        const legit = new Set([a, b].map((n) => `node-${n.node}`));
        let hostileAppended = 0;
        for (const [id, n] of stored.reports) if (id.startsWith('hostile/')) hostileAppended += n;
        for (const [stream, n] of stored.reportsByStream) if (!legit.has(stream)) hostileAppended += n;
        // The valid load sends no alive, so any AliveSeen came from a hostile body.
        for (const n of stored.aliveByStream.values()) hostileAppended += n;
        const deadLettered = engine.ingest.stats().deadLettered;
        return await tally(hostileOverBroker, store, load, recover, {
          hostileTried: tried,
          hostileAppended,
          notes: [`${deadLettered} dead-lettered to mesh.dead with a code`],
          checks: { everyHostileMessageDeadLettered: deadLettered === tried },
        });
      } finally {
        await noUserId.close().catch(() => undefined);
        await engine.stop();
        await store.close();
      }
    }),
};

export const allScenarios: readonly Scenario[] = [
  baseline,
  proxyReset,
  proxyBlackhole,
  closeAllConnections,
  storeUnavailable,
  diskFull,
  engineSigkill,
  hostileOverBroker,
];

/** Run one scenario in its own vhost, always cleaning up. */
export async function runScenario(s: Scenario): Promise<ScenarioResult> {
  const lab = await createFaultLab(`converge-fault-${s.name.replace(/[^a-z0-9]+/gi, '-').toLowerCase()}`);
  try {
    return await s.run(lab);
  } finally {
    await lab.remove();
  }
}

/**
 * Register each scenario as a test asserting what RELIABILITY.md promises. Without a broker:
 * one failing test under CONVERGE_REQUIRE_BROKER=1, else one loudly skipped test.
 */
export function registerScenarioTests(what: string, scenarios: readonly Scenario[]): void {
  describeOnBroker(what, () => {
    for (const s of scenarios) {
      void test(
        `${s.name} (${s.faults}): every confirmed report stored exactly once, no hostile input appended`,
        { timeout: 240_000 },
        async (t) => {
          const r = await runScenario(s);
          if (r.notes.some((n) => n.startsWith('skipped:'))) {
            console.warn(`\n*** SKIPPING ${s.name}: ${r.notes.join('; ')} ***\n`);
            t.skip(r.notes.join('; '));
            return;
          }
          t.diagnostic(
            `${r.sent} sent, ${r.confirmed} confirmed, ${r.stored} stored; recovered in ${r.recoverMs ?? '—'} ms; ${r.notes.join('; ')}`,
          );
          assert.ok(r.sent > 0);
          assert.equal(r.confirmed, r.sent, 'every report was eventually confirmed by the broker');
          assert.equal(r.lost, 0, 'confirmed reports missing from the store');
          assert.equal(r.duplicated, 0, 'reports stored more than once');
          assert.equal(r.stored, r.confirmed);
          assert.equal(r.hostileAppended, 0, 'hostile input became events');
          assert.notEqual(r.recoverMs, null, 'never recovered');
          for (const [check, held] of Object.entries(r.checks)) assert.equal(held, true, `${check} did not hold; ${r.notes.join('; ')}`);
        },
      );
    }
  });
}
