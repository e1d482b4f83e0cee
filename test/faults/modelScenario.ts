import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import amqp from 'amqplib';
import fc from 'fast-check';
import { generateSigningKey } from '../../src/core/declaration/index.ts';
import type { SigningKey } from '../../src/core/declaration/index.ts';
import { compareStates, replayStore } from '../../src/readModel/replay.ts';
import { streamOf } from '../../src/core/events/index.ts';
import { startEngineOverAmqp } from '../support/faults/engineOverAmqp.ts';
import type { EngineOverAmqp } from '../support/faults/engineOverAmqp.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { nodeQueueOf } from '../../src/transport/brokerNames.ts';
import { encodeAlive, encodeReport } from '../../src/core/wire/index.ts';
import { initialNodeState } from '../../projections/index.ts';
import type { NodeState, NodeStatus } from '../../projections/index.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';
import { connectNode, faultSeed, nodeIds, publishUntilConfirmed, readStored } from './scenarios.ts';
import type { FaultLab, NodeConn, Scenario, ScenarioResult } from './scenarios.ts';

// Model-based test of the whole engine (createServer over real RabbitMQ and SQLite): fast-check
// draws sequences of commands — send, deliver a report (matching, stale, unknown, undeclared;
// applied, failed or refused), deliver one again, alive, crash, restart, replay — runs them
// against the real engine and against a model small enough to be obviously right (per node: the
// digests sent, the last report, three counters), and after every command compares the node
// states the engine serves with the model. Nothing is compared until the command's effect has
// landed (the report's message id is in the store, or ingest acked the delivery, and the
// projection reached the store head) — each wait is bounded, never a sleep.

// ---------------------------------------------------------------- the model

type ReportModel = Readonly<{ declared: string | null; refused: boolean; failed: boolean }>;
type NodeModel = { sent: string[]; report: ReportModel | null; stale: number; unknown: number; undeclared: number; seen: boolean };
type Model = {
  ids: readonly string[];
  nodes: Map<string, NodeModel>;
  up: boolean;
  /** The nodes as the store held them when the engine crashed (what a replay while down must find). */
  atCrash: Map<string, NodeModel> | null;
};

const cloneNodes = (m: ReadonlyMap<string, NodeModel>): Map<string, NodeModel> =>
  new Map([...m].map(([k, v]) => [k, { ...v, sent: [...v.sent] }]));

/** What docs/design.md §3 says the node's state is, from the model alone. */
function expectedOf(m: NodeModel) {
  const latest = m.sent[m.sent.length - 1] ?? null;
  const caughtUp = latest !== null && m.report?.declared === latest;
  const status: NodeStatus =
    latest === null ? 'undeclared' : !caughtUp ? 'behind' : m.report?.refused ? 'refused' : m.report?.failed ? 'degraded' : 'converged';
  return {
    status,
    caughtUp,
    anomalies: { stale: m.stale, unknown: m.unknown, undeclared: m.undeclared },
    sent: latest === null ? null : { digest: latest, serial: m.sent.length },
    reported: m.report === null ? null : { declared: m.report.declared, refused: m.report.refused },
    seen: m.seen,
  };
}

function observedOf(s: NodeState): ReturnType<typeof expectedOf> {
  return {
    status: s.status,
    caughtUp: s.caughtUp,
    anomalies: { ...s.anomalies },
    sent: s.sent === null ? null : { digest: s.sent.digest, serial: s.sent.serial },
    reported: s.reported === null ? null : { declared: s.reported.declared, refused: s.reported.refused !== '' },
    seen: s.lastSeenAt !== null,
  };
}

function assertMatches(nodes: ReadonlyMap<string, NodeModel>, state: (node: string) => NodeState | undefined, where: string): void {
  for (const [node, nm] of nodes)
    assert.deepEqual(observedOf(state(node) ?? initialNodeState(node)), expectedOf(nm), `${where}: node ${node} differs from the model`);
}

// ---------------------------------------------------------------- the real system

/** Figures for RELIABILITY.md, summed over every run. */
type Tally = {
  runs: number;
  commands: number;
  published: number;
  confirmed: number;
  stored: number;
  lost: number;
  duplicated: number;
  sends: number;
  crashes: number;
  restarts: number;
  duplicates: number;
  stale: number;
  replays: number;
  relayed: number;
  recoverMs: number[];
};

type Real = {
  lab: FaultLab;
  dir: string;
  key: SigningKey;
  nodes: Map<string, NodeConn>;
  engine: EngineOverAmqp | null;
  /** Deliveries published while the engine was down: the next engine must ack at least these. */
  whileDown: number;
  /** Every report message id published, and the last report per node (for duplicate delivery). */
  reportIds: Map<string, string>;
  lastReport: Map<string, { body: Buffer; messageId: string }>;
  seq: number;
  tally: Tally;
};

const storePath = (r: Real): string => join(r.dir, 'converge.db');
const wait = async (what: string, cond: () => Promise<boolean> | boolean): Promise<void> => {
  await until(what, cond, { timeoutMs: 20_000 });
};

const startEngine = (r: Real): Promise<EngineOverAmqp> =>
  // Snapshots every 3 events, so a restart usually restores one and folds only the tail.
  startEngineOverAmqp({ url: r.lab.engineUrl, storePath: storePath(r), key: r.key, logger, snapshotEvery: 3 });

const up = (r: Real): EngineOverAmqp => {
  if (r.engine === null) throw new Error('the engine is down');
  return r.engine;
};

async function isStored(r: Real, node: string, messageId: string): Promise<boolean> {
  const events = await up(r).store.readStream(streamOf(node));
  return events.some((e) => e.type === 'ReportReceived' && e.data.transport.messageId === messageId);
}

/** Bounded wait for the projection to fold everything the store holds. */
async function projected(r: Real): Promise<void> {
  const e = up(r);
  const head = await e.store.headPosition();
  await wait('the projection to reach the store head', () => {
    const at = e.engine.runner.readModel.position();
    return head === null || (at !== null && at >= head);
  });
}

/**
 * First deliveries (not redeliveries) the engine has taken, counted only once everything it
 * received is settled (acked, or refused), else -1. Not its acks alone: a crash may lose the acks
 * of deliveries already stored, the broker redelivers them to the restarted engine, and their acks
 * were taken for a new delivery's (an alive compared before it was folded: "seen: false").
 */
const settledFirstDeliveries = (r: Real): number => {
  const s = up(r).engine.ingest?.stats();
  if (s === undefined) return 0;
  return s.pending === 0 && s.acked + s.rateLimited + s.deadLettered >= s.received ? s.received - s.redelivered : -1;
};
const firstDeliveries = (r: Real): number => {
  const s = up(r).engine.ingest?.stats();
  return s === undefined ? 0 : s.received - s.redelivered;
};

/** Publish as the Go node does: retried with the same message id until the broker confirms it. */
async function publish(r: Real, node: string, kind: 'report' | 'alive', body: Buffer, messageId: string): Promise<boolean> {
  const conn = r.nodes.get(node);
  if (conn === undefined) throw new Error(`no link for ${node}`);
  return publishUntilConfirmed(conn.link, kind, body, messageId, () => false);
}

/** Publish a report; in the engine when up (stored and projected), else queued in the broker. */
async function deliverReport(m: Model, r: Real, index: number, declared: string | null, refused: boolean, failed: boolean): Promise<void> {
  const node = m.ids[index] ?? '';
  const nm = m.nodes.get(node);
  if (nm === undefined) throw new Error(`no model for ${node}`);
  const messageId = `${node}/m${++r.seq}`;
  const body = encodeReport({
    node,
    applied: refused || failed ? [] : ['web'],
    failed: failed && !refused ? { web: 'model says no' } : {},
    refused: refused ? 'model refuses' : '',
    carried: [],
    declared,
  });
  r.tally.published++;
  r.reportIds.set(messageId, node);
  r.lastReport.set(node, { body, messageId });
  if (await publish(r, node, 'report', body, messageId)) r.tally.confirmed++;
  // The fold's classification, in the model's words: at the moment the report is folded, which
  // is after every earlier command (commands wait for their effect) and before any later send.
  const latest = nm.sent[nm.sent.length - 1];
  if (declared === null) nm.undeclared++;
  else if (declared !== latest) {
    if (nm.sent.includes(declared)) nm.stale++;
    else nm.unknown++;
  }
  nm.report = { declared, refused, failed: failed && !refused };
  nm.seen = true;
  if (!m.up) {
    r.whileDown++;
    return;
  }
  await wait(`report ${messageId} to be stored`, () => isStored(r, node, messageId));
  await projected(r);
  assertMatches(m.nodes, (n) => up(r).engine.runner.readModel.get(n), `after a report from ${node}`);
}

/** Publish something that must change nothing but liveness (alive, a repeated report); wait for its ack. */
async function deliverAndAwaitAck(
  m: Model,
  r: Real,
  node: string,
  kind: 'report' | 'alive',
  body: Buffer,
  messageId: string,
  what: string,
): Promise<void> {
  if (!m.up) {
    await publish(r, node, kind, body, messageId);
    r.whileDown++;
    return;
  }
  const before = firstDeliveries(r);
  await publish(r, node, kind, body, messageId);
  await wait(`ingest to take and ack the ${what}`, () => settledFirstDeliveries(r) >= before + 1);
  await projected(r);
  assertMatches(m.nodes, (n) => up(r).engine.runner.readModel.get(n), `after ${what} from ${node}`);
}

// ---------------------------------------------------------------- commands

type Cmd = fc.AsyncCommand<Model, Real>;
const nodeIndex = fc.integer({ min: 0, max: 1 });

class Send implements Cmd {
  constructor(readonly index: number) {}
  check = (m: Readonly<Model>): boolean => m.up;
  async run(m: Model, r: Real): Promise<void> {
    const node = m.ids[this.index] ?? '';
    const nm = m.nodes.get(node);
    const send = up(r).engine.send;
    if (nm === undefined || send === null) throw new Error('no node or no sender');
    const { digest, serial } = await send(node, [{ id: 'web', image: `web:${nm.sent.length + 1}` }]);
    nm.sent.push(digest);
    r.tally.sends++;
    assert.equal(serial, nm.sent.length, 'serials grow by one per send from 1');
    await projected(r);
    assertMatches(m.nodes, (n) => up(r).engine.runner.readModel.get(n), `after a send to ${node}`);
  }
  toString = (): string => `send(${this.index})`;
}

class Report implements Cmd {
  constructor(
    readonly index: number,
    readonly outcome: 'applied' | 'failed' | 'refused',
  ) {}
  check = (): boolean => true;
  run = (m: Model, r: Real): Promise<void> => {
    const nm = m.nodes.get(m.ids[this.index] ?? '');
    // About the latest declaration; a legacy report (no digest) when nothing was sent yet.
    const declared = nm?.sent[nm.sent.length - 1] ?? null;
    return deliverReport(m, r, this.index, declared, this.outcome === 'refused', this.outcome === 'failed');
  };
  toString = (): string => `report(${this.index}, ${this.outcome})`;
}

class StaleReport implements Cmd {
  constructor(
    readonly index: number,
    readonly pick: number,
  ) {}
  check = (m: Readonly<Model>): boolean => (m.nodes.get(m.ids[this.index] ?? '')?.sent.length ?? 0) >= 2;
  run = (m: Model, r: Real): Promise<void> => {
    const sent = m.nodes.get(m.ids[this.index] ?? '')?.sent ?? [];
    r.tally.stale++;
    // The seed's race: a report about an earlier declaration, landing after a later send.
    return deliverReport(m, r, this.index, sent[this.pick % (sent.length - 1)] ?? null, false, false);
  };
  toString = (): string => `staleReport(${this.index}, ${this.pick})`;
}

class UnknownReport implements Cmd {
  constructor(
    readonly index: number,
    readonly digest: string,
  ) {}
  check = (): boolean => true;
  run = (m: Model, r: Real): Promise<void> => deliverReport(m, r, this.index, this.digest, false, false);
  toString = (): string => `unknownReport(${this.index}, ${this.digest.slice(0, 8)}…)`;
}

class DuplicateDelivery implements Cmd {
  constructor(readonly index: number) {}
  check = (m: Readonly<Model>): boolean => m.nodes.get(m.ids[this.index] ?? '')?.report !== null;
  async run(m: Model, r: Real): Promise<void> {
    const node = m.ids[this.index] ?? '';
    const last = r.lastReport.get(node);
    if (last === undefined) throw new Error(`no report from ${node} to repeat`);
    r.tally.duplicates++;
    // The same message again (same id, same bytes), as a node whose confirm was lost re-sends it.
    await deliverAndAwaitAck(m, r, node, 'report', last.body, last.messageId, 'repeated report');
  }
  toString = (): string => `duplicate(${this.index})`;
}

class Alive implements Cmd {
  constructor(readonly index: number) {}
  check = (): boolean => true;
  async run(m: Model, r: Real): Promise<void> {
    const node = m.ids[this.index] ?? '';
    const nm = m.nodes.get(node);
    if (nm !== undefined) nm.seen = true;
    await deliverAndAwaitAck(m, r, node, 'alive', encodeAlive({ node }), `${node}/alive/${++r.seq}`, 'alive');
  }
  toString = (): string => `alive(${this.index})`;
}

class Crash implements Cmd {
  check = (m: Readonly<Model>): boolean => m.up;
  async run(m: Model, r: Real): Promise<void> {
    await up(r).crash();
    r.engine = null;
    r.whileDown = 0;
    r.tally.crashes++;
    m.up = false;
    m.atCrash = cloneNodes(m.nodes);
  }
  toString = (): string => 'crash';
}

/** Build the engine again on the same files; wait until it took everything queued while down. */
async function restart(m: Model, r: Real): Promise<void> {
  const t0 = Date.now();
  r.engine = await startEngine(r);
  m.up = true;
  m.atCrash = null;
  r.tally.restarts++;
  const queued = r.whileDown;
  try {
    await wait(
      `the restarted engine to take and ack the ${queued} deliveries queued while it was down`,
      () => settledFirstDeliveries(r) >= queued,
    );
    for (const [id, node] of r.reportIds) await wait(`report ${id} to be stored after the restart`, () => isStored(r, node, id));
  } catch (e) {
    const missing: string[] = [];
    for (const [id, node] of r.reportIds) if (!(await isStored(r, node, id))) missing.push(id);
    throw new Error(
      `${(e as Error).message}; ingest ${JSON.stringify(up(r).engine.ingest?.stats())}; reports not stored: ${missing.join(', ') || 'none'}`,
      { cause: e },
    );
  }
  await projected(r);
  r.tally.recoverMs.push(Date.now() - t0);
  r.whileDown = 0;
}

class Restart implements Cmd {
  check = (m: Readonly<Model>): boolean => !m.up;
  async run(m: Model, r: Real): Promise<void> {
    await restart(m, r);
    assertMatches(m.nodes, (n) => up(r).engine.runner.readModel.get(n), 'after a restart');
  }
  toString = (): string => 'restart';
}

class Replay implements Cmd {
  check = (): boolean => true;
  async run(m: Model, r: Real): Promise<void> {
    r.tally.replays++;
    if (m.up) {
      await projected(r);
      const e = up(r);
      const replayed = await replayStore(e.store);
      assert.deepEqual(
        compareStates(replayed, e.engine.runner.readModel.nodes()),
        [],
        'the live read model differs from a replay from zero',
      );
      assertMatches(m.nodes, (n) => replayed.get(n), 'replay from zero');
      return;
    }
    // While down: the files alone, as `converge replay --verify` would read them.
    const reader = createSqliteEventStore(storePath(r));
    try {
      const replayed = await replayStore(reader);
      assertMatches(m.atCrash ?? m.nodes, (n) => replayed.get(n), 'replay from zero while the engine is down');
    } finally {
      await reader.close();
    }
  }
  toString = (): string => 'replay';
}

/** Count the commands that actually ran (a command whose `check` fails is skipped). */
const counted = (c: Cmd): Cmd => {
  const wrapped: Cmd & { [fc.toStringMethod]: () => string } = {
    check: (m) => c.check(m),
    run: (m, r) => {
      r.tally.commands++;
      return c.run(m, r);
    },
    toString: () => c.toString(),
    [fc.toStringMethod]: () => c.toString(),
  };
  return wrapped;
};

// Weighted so that a run of ≤15 commands usually holds several sends, reports about them and a
// crash with a restart; `check` skips what makes no sense in the moment (restart while up…).
const command: fc.Arbitrary<Cmd> = fc
  .oneof(
    { weight: 3, arbitrary: nodeIndex.map((i): Cmd => new Send(i)) },
    {
      weight: 3,
      arbitrary: fc
        .tuple(nodeIndex, fc.constantFrom('applied', 'failed', 'refused') as fc.Arbitrary<'applied' | 'failed' | 'refused'>)
        .map(([i, o]): Cmd => new Report(i, o)),
    },
    { weight: 2, arbitrary: fc.tuple(nodeIndex, fc.nat()).map(([i, p]): Cmd => new StaleReport(i, p)) },
    { weight: 1, arbitrary: fc.tuple(nodeIndex, fc.stringMatching(/^[0-9a-f]{64}$/)).map(([i, d]): Cmd => new UnknownReport(i, d)) },
    { weight: 1, arbitrary: nodeIndex.map((i): Cmd => new DuplicateDelivery(i)) },
    { weight: 1, arbitrary: nodeIndex.map((i): Cmd => new Alive(i)) },
    { weight: 1, arbitrary: fc.constant<Cmd>(new Crash()) },
    { weight: 2, arbitrary: fc.constant<Cmd>(new Restart()) },
    { weight: 1, arbitrary: fc.constant<Cmd>(new Replay()) },
  )
  .map(counted);

// ---------------------------------------------------------------- one run

/** After the commands: restart if down, then every report stored once, every send relayed, replay = read model. */
async function finalChecks(m: Model, r: Real): Promise<void> {
  if (!m.up) await restart(m, r);
  const e = up(r);
  await projected(r);
  const { reports } = await readStored(e.store);
  for (const id of r.reportIds.keys()) {
    const n = reports.get(id) ?? 0;
    if (n === 0) r.tally.lost++;
    else r.tally.stored++;
    if (n > 1) r.tally.duplicated += n - 1;
  }
  for (const id of r.reportIds.keys()) assert.equal(reports.get(id) ?? 0, 1, `report ${id} stored exactly once`);
  assert.deepEqual(
    compareStates(await replayStore(e.store), e.engine.runner.readModel.nodes()),
    [],
    'read model differs from a replay from zero',
  );
  assertMatches(m.nodes, (n) => e.engine.runner.readModel.get(n), 'at the end');
  // The relay (outbox) published every send to the node's queue at least once, crashes or not.
  // The inbox keeps one message (a newer declaration drops an older one still
  // waiting), so what must reach it is the latest send; anything else it holds must have been sent.
  for (const [node, nm] of m.nodes) {
    if (nm.sent.length === 0) continue; // the relay declares a node's queue with its first send
    const latest = nm.sent[nm.sent.length - 1]!;
    const got = new Set<string>();
    await wait(`the latest declaration sent to ${node} to reach ${nodeQueueOf(node)}`, async () => {
      // A fresh connection per look: a queue not declared yet is a 404 that closes the channel, and
      // a quorum queue whose replica is still starting answers `noproc`, which closes the connection.
      let conn: amqp.ChannelModel | null = null;
      try {
        conn = await amqp.connect(r.lab.engineUrl);
        conn.on('error', () => undefined);
        const ch = await conn.createChannel();
        ch.on('error', () => undefined);
        for (
          let msg = await ch.get(nodeQueueOf(node), { noAck: true });
          msg !== false;
          msg = await ch.get(nodeQueueOf(node), { noAck: true })
        ) {
          const id = msg.properties.messageId as unknown;
          if (typeof id === 'string') got.add(id);
        }
      } catch {
        return false;
      } finally {
        await conn?.close().catch(() => undefined);
      }
      return got.has(latest);
    });
    for (const d of got) assert.ok(nm.sent.includes(d), `${nodeQueueOf(node)} received ${d}, never sent`);
    r.tally.relayed += nm.sent.length;
  }
}

async function oneRun(lab: FaultLab, key: SigningKey, tally: Tally, cmds: readonly Cmd[]): Promise<void> {
  const run = ++tally.runs;
  const ids = nodeIds(`model${run}`, 2);
  const r: Real = {
    lab,
    dir: mkdtempSync(join(lab.dir, `model-${run}-`)),
    key,
    nodes: new Map(),
    engine: null,
    whileDown: 0,
    reportIds: new Map(),
    lastReport: new Map(),
    seq: 0,
    tally,
  };
  const m: Model = {
    ids,
    nodes: new Map(ids.map((id) => [id, { sent: [], report: null, stale: 0, unknown: 0, undeclared: 0, seen: false }])),
    up: true,
    atCrash: null,
  };
  try {
    for (const id of ids) r.nodes.set(id, await connectNode(lab, id));
    r.engine = await startEngine(r);
    await fc.asyncModelRun(() => ({ model: m, real: r }), cmds);
    await finalChecks(m, r);
  } finally {
    await r.engine?.stop().catch(() => undefined);
    for (const c of r.nodes.values()) {
      await c.link.close().catch(() => undefined);
      await c.conn.close().catch(() => undefined);
    }
  }
}

export const modelRuns = (): number => Math.max(1, Number(process.env['CONVERGE_FAULT_MODEL_RUNS'] ?? 12));
const maxCommands = 15;

export const modelBased: Scenario = {
  name: 'model-based (fast-check)',
  faults: `${modelRuns()} runs × ≤${maxCommands} random commands against the whole engine: send, report (matching/stale/unknown/undeclared; applied, failed, refused), duplicate delivery, alive, crash (connection closed undrained, memory dropped), restart, replay`,
  run: async (lab) => {
    const seed = faultSeed('model-based');
    const key = generateSigningKey();
    const tally: Tally = {
      runs: 0,
      commands: 0,
      published: 0,
      confirmed: 0,
      stored: 0,
      lost: 0,
      duplicated: 0,
      sends: 0,
      crashes: 0,
      restarts: 0,
      duplicates: 0,
      stale: 0,
      replays: 0,
      relayed: 0,
      recoverMs: [],
    };
    const property = fc.asyncProperty(fc.array(command, { minLength: maxCommands - 5, maxLength: maxCommands }), (cmds) =>
      oneRun(lab, key, tally, cmds),
    );
    // Shrinking re-runs the engine many times; on by request only (the seed replays the failure).
    const details = await fc.check(property, { numRuns: modelRuns(), seed, endOnFailure: process.env['CONVERGE_FAULT_SHRINK'] !== '1' });
    const failure = details.failed
      ? `${String((details.errorInstance as Error | null)?.message ?? details.errorInstance).replace(/\s+/g, ' ')} — counterexample ${fc.stringify(details.counterexample)} (seed ${details.seed}, path ${details.counterexamplePath ?? '—'})`
      : null;
    const result: ScenarioResult = {
      scenario: modelBased.name,
      faults: modelBased.faults,
      sent: tally.published,
      confirmed: tally.confirmed,
      stored: tally.stored,
      lost: tally.lost,
      duplicated: tally.duplicated,
      hostileTried: 0,
      hostileAppended: 0,
      recoverMs: tally.recoverMs.length === 0 ? 0 : Math.max(...tally.recoverMs),
      notes: [
        `seed ${seed}; ${tally.runs} run(s), ${tally.commands} commands: ${tally.sends} sends, ${tally.crashes} crashes, ${tally.restarts} restarts, ${tally.duplicates} duplicate deliveries, ${tally.stale} stale reports, ${tally.replays} replays; ${tally.relayed} sends relayed to node queues`,
        'time to recover = slowest restart until everything queued while down was stored and projected',
        ...(failure === null ? [] : [`FAILED: ${failure}`]),
      ],
      checks: { modelMatchedAfterEveryCommand: !details.failed },
    };
    return result;
  },
};
