// Rollouts at fleet speed. Two parts, each against a baseline in the same run:
//
// 1. Sending: N fresh nodes on a SQLite store opened as `serve` opens it (WAL, the writer thread at
//    synchronous=FULL: src/store/sqlite/sqliteWriterThread.ts) sent one declaration each
//    - one at a time (src/engine/send.ts: one append, so one transaction, per node; 48 in flight
//      as the issue's 48 HTTP clients were),
//    - in bulk (src/engine/sendBatch.ts: 500 nodes per append call, one transaction),
//    - and the store's raw batch append of the same declarations built and signed beforehand, 500
//      per call: the ceiling the bulk path can approach (it also builds and signs each one).
//    Passes alternate (raw, bulk, one at a time, …) so no side always gets the quieter machine.
//
// 2. A rollout over BENCH_ROLLOUT_NODES (10,000) simulated nodes on the in-process broker, with
//    the engine wired as `converge serve` wires it (src/app/server.ts: projections, ingest,
//    relay, the rollout driver) over SQLite as serve opens it. The simulated nodes run in a worker
//    thread (support/remoteFleet.ts), as a fleet runs on machines of its own: their verifying and
//    reporting neither wait on the engine's event loop nor count as its CPU. It runs twice, with the
//    fleet apart and with all its work at the engine's priority (`fleetModes` below). Every node applies in
//    BENCH_APPLY_MS; a wave's nodes apply in parallel, so the nodes' own time on the rollout's
//    critical path is waves × apply. Orchestration overhead = wall time − that. Events/s = events
//    the store took during the rollout (declarations, reports, the rollout's own) over its wall time.
//
//   npm run bench -- rollout      BENCH_SENDS=10000 BENCH_PASSES=3 BENCH_ROLLOUT_NODES=10000 BENCH_APPLY_MS=200
//   (the fleet-scale figure: BENCH_ROLLOUT_NODES=100000 BENCH_APPLY_MS=1000)
//   BENCH_CPU_PROFILE=/tmp/rollout.cpuprofile also writes the engine thread's profile over the rollout.
//   BENCH_TURNS_JSON=/tmp/turns.json also writes its 50 longest event-loop turns by CPU, with their owners.
//   BENCH_HEAP_PROFILE=/tmp/rollout.heapprofile also writes where the engine thread allocated over the rollout;
//   with BENCH_HEAP_SURVIVORS=1, only what outlived a scavenge (what the young collections copied).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { loadConfig } from '../src/app/config.ts';
import { createServer } from '../src/app/server.ts';
import { generateSigningKey, publicKeyToPem } from '../src/core/declaration/index.ts';
import { readRollout, startRollout } from '../src/engine/rolloutCommands.ts';
import { createSender } from '../src/engine/send.ts';
import type { LoadNode } from '../src/engine/sendView.ts';
import { createBatchSender } from '../src/engine/sendBatch.ts';
import { createSignPool } from '../src/engine/signPool.ts';
import { makeDeclarationSent, streamOf } from '../src/core/events/index.ts';
import { createSqliteEventStore } from '../src/store/sqlite/sqliteEventStore.ts';
import { createInProcessBroker } from '../src/transport/inProcess.ts';
import { percentile, startApiProbe } from './support/apiProbe.ts';
import { startCpuShares } from './support/cpuByStack.ts';
import type { CpuShares } from './support/cpuByStack.ts';
import { describeGc, startGcMeter, startHeapSampling } from './support/gcMeter.ts';
import type { GcFigures } from './support/gcMeter.ts';
import { describeTurns, startTurnMeter } from './support/longTurns.ts';
import type { Turn } from './support/longTurns.ts';
import { createBenchReport } from './support/report.ts';
import { ownThreadId, startRemoteFleet, threadCpuMs } from './support/remoteFleet.ts';

const scale = Number(process.env['CONVERGE_BENCH_SCALE'] ?? 1);
const sends = Math.max(500, Math.round(Number(process.env['BENCH_SENDS'] ?? 10_000) * scale));
const passes = Number(process.env['BENCH_PASSES'] ?? 3);
const rolloutNodes = Math.max(100, Math.round(Number(process.env['BENCH_ROLLOUT_NODES'] ?? 10_000) * scale));
const applyMs = Number(process.env['BENCH_APPLY_MS'] ?? 200);
const waves = process.env['BENCH_WAVES'] ?? '1,1%,10%,50%,100%';
const batch = 500;
/**
 * How the simulated fleet shares the machine with the engine. A real fleet verifies, applies and
 * reports on machines of its own, all at once; here one thread does it for every node, and one
 * Ed25519 verify is about 0.1 ms: 100,000 of them are seconds of one core on the rollout's path,
 * at the engine's priority. So the rollout runs twice: with the fleet apart (its thread at nice
 * +10, so it takes the cores the engine leaves, and every 100th signature verified, the others
 * checked for length), which is what the control plane's figures are read from; and with every
 * node's work on that one thread at the engine's priority, as before, for comparison.
 */
type FleetMode = Readonly<{ key: string; what: string; nice: number; verifyEvery: number }>;
const fleetModes: readonly FleetMode[] = [
  { key: 'apart', what: 'the fleet apart (its thread at nice +10, 1 signature in 100 verified)', nice: 10, verifyEvery: 100 },
  { key: 'together', what: "every node's work on one thread at the engine's priority, every signature verified", nice: 0, verifyEvery: 1 },
];
const inFlight = 48;
const logger = pino({ level: 'silent' });
const key = generateSigningKey();
const dir = mkdtempSync(join(tmpdir(), 'converge-bench-rollout-'));
let files = 0;
// As `converge serve` opens SQLite (its default --sqlite-sync): commits on the writer thread.
const openStore = (path: string) => createSqliteEventStore(path, { sync: 'thread' });
// A write before the clock starts: the writer thread's start (under tsx, compiling its modules) is
// no part of a send.
const fresh = async () => {
  const store = openStore(join(dir, `s${files++}.db`));
  await store.setCheckpoint('bench-warm', 0n);
  return store;
};
const resources = [
  { id: 'web', image: 'registry.local/web:2', ports: [8080] },
  { id: 'sidecar', image: 'registry.local/envoy:1' },
];
const nodeIds = (n: number, tag: string): string[] => Array.from({ length: n }, (_, i) => `${tag}-${String(i).padStart(6, '0')}`);
// What the read model says of a node never sent anything: both senders get their view this way.
const freshView: LoadNode = async () => ({ revision: -1n, carried: [], sent: null });

const makeRates: number[] = [];

async function raw(pass: number): Promise<number> {
  const store = await fresh();
  const now = new Date();
  const t0 = performance.now();
  const events = nodeIds(sends, `r${pass}`).map((node) => makeDeclarationSent({ node, serial: 1, resources, key, now }));
  makeRates.push(sends / ((performance.now() - t0) / 1000));
  const t = performance.now();
  for (let i = 0; i < events.length; i += batch) {
    await store.append(
      events.slice(i, i + batch).map((e) => ({ stream: streamOf(e.data.node), expected: 'no_stream' as const, events: [e] })),
    );
  }
  const perS = sends / ((performance.now() - t) / 1000);
  await store.close();
  return perS;
}

// As the rollout driver sends: signed on the signing thread, each batch while the one before is
// appended (src/engine/signPool.ts); BENCH_SIGN_THREAD=0 signs on this thread, as before it.
const signOnThread = process.env['BENCH_SIGN_THREAD'] !== '0';
/** The engine thread's CPU per bulk send of each pass (µs): what signing elsewhere saves it. */
const bulkCpuUs: number[] = [];

async function bulk(pass: number): Promise<number> {
  const store = await fresh();
  const signPool = signOnThread ? createSignPool({ key }) : undefined;
  // The thread's start (under tsx, compiling its modules) is no part of a send, as the store's.
  await signPool?.sign(new Date(), []);
  const sender = createBatchSender({ store, key, loadNode: freshView, ...(signPool === undefined ? {} : { signPool }) });
  const nodes = nodeIds(sends, `b${pass}`);
  const items = (i: number) => nodes.slice(i, i + batch).map((node) => ({ node, resources }));
  const cpu0 = threadCpuMs(ownThreadId());
  const t = performance.now();
  for (let i = 0; i < nodes.length; i += batch) {
    const r = await sender.sendMany(items(i), { ahead: items(i + batch) });
    if (r.outcomes.some((o) => !o.ok)) throw new Error('bulk send refused a node');
  }
  const perS = sends / ((performance.now() - t) / 1000);
  bulkCpuUs.push(((threadCpuMs(ownThreadId()) - cpu0) * 1000) / sends);
  await signPool?.close();
  await store.close();
  return perS;
}

async function oneAtATime(pass: number): Promise<number> {
  const store = await fresh();
  const sender = createSender({ store, key, loadNode: freshView });
  const nodes = nodeIds(sends, `o${pass}`);
  let next = 0;
  const t = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < nodes.length) await sender.send(nodes[next++]!, resources);
    }),
  );
  const perS = sends / ((performance.now() - t) / 1000);
  await store.close();
  return perS;
}

const rawRates: number[] = [];
const bulkRates: number[] = [];
const oneRates: number[] = [];
for (let p = 0; p < passes; p++) {
  rawRates.push(await raw(p));
  bulkRates.push(await bulk(p));
  oneRates.push(await oneAtATime(p));
}

// ------------------------------------------------------------------ the rollout

type Phase = Readonly<{ nodes: number; sendingMs: number; convergingMs: number }>;
type Latency = Readonly<{ idle: readonly number[]; during: readonly number[]; failed: number }>;

// Whose CPU the main thread spent during the rollout (support/cpuByStack.ts): the driver is its
// files and what they call (deciding, folding its stream, the bulk sender's building, signing and
// store append); its sends are the bulk sender's share of that, which the floor already counts.
// Not holds.ts: the API reads the holds on every GET of a node, and a read resumed after an await
// has no caller on its stack to tell whose it was (the driver's: one small read a batch).
const shares = {
  driver: [
    '/src/engine/rolloutDriver.ts',
    '/src/engine/rolloutDriverStep.ts',
    '/src/engine/rolloutDriven.ts',
    '/src/engine/rolloutSends.ts',
    '/src/engine/rolloutProgressAhead.ts',
    '/src/engine/rolloutGate.ts',
    '/src/engine/rolloutClock.ts',
    '/src/engine/sendBatch.ts',
    '/src/engine/sendSigning.ts',
    '/src/engine/signPool.ts',
    '/src/engine/sendView.ts',
  ],
  driverSends: ['/src/engine/sendBatch.ts', '/src/engine/sendSigning.ts', '/src/engine/signPool.ts', '/src/engine/sendView.ts'],
  // The fleet's own work is on its thread; on this one, the broker and the bridge to that thread.
  transport: ['/src/transport/inProcess.ts', '/bench/support/remoteFleet.ts'],
  ingest: ['/src/engine/ingest/'],
  projections: ['/src/readModel/', '/projections/'],
  relay: ['/src/engine/relay.ts'],
} as const;
const idleMs = 5_000;

async function rollout(mode: FleetMode): Promise<{
  wallMs: number;
  waveCount: number;
  events: number;
  decisions: number;
  phases: readonly Phase[];
  cpu: CpuShares;
  threadCpu: Readonly<{ mainMs: number; fleetMs: number }>;
  nodeApi: Latency;
  rolloutApi: Latency;
  loop: Readonly<{ p50: number; p99: number; max: number; cpuP99: number; cpuMax: number; longest: readonly Turn[] }>;
  gc: Readonly<{ during: GcFigures; idle: GcFigures }>;
}> {
  const path = join(dir, `rollout-${mode.key}.db`);
  const store = openStore(path);
  await store.setCheckpoint('bench-warm', 0n);
  const config = loadConfig({ flags: { store: `sqlite:${path}`, port: '0', host: '127.0.0.1' }, env: {} });
  const broker = createInProcessBroker();
  const ids = nodeIds(rolloutNodes, 'node');
  const fleet = await startRemoteFleet(broker, {
    nodes: ids,
    applyMs,
    publicKeyPem: publicKeyToPem(key),
    nice: mode.nice,
    verifyEvery: mode.verifyEvery,
  });
  const server = createServer({
    config,
    logger,
    store,
    key,
    dashboardDir: null,
    transport: { ingestSource: broker.ingestSource(), publisher: fleet.publisher },
  });
  const url = await server.start();
  const head = (await store.headPosition()) ?? 0n;
  // Two nodes of the first waves (a node is known once it was sent something) and the rollout
  // itself, read all along; idle is after the rollout, same server, same nodes.
  const paths = [`/v1/nodes/${ids[0]}`, '/v1/rollouts/bench', `/v1/nodes/${ids[Math.floor(ids.length * 0.005)]}`, '/v1/rollouts/bench'];
  const probe = await startApiProbe(url, paths);
  const profiler = await startCpuShares(shares, 1_000, mode.key === 'apart' ? (process.env['BENCH_CPU_PROFILE'] ?? null) : null);
  const mainTid = ownThreadId();
  const cpu0 = { main: threadCpuMs(mainTid), fleet: fleet.cpuMs() };
  const turns = startTurnMeter();
  const heap = await startHeapSampling(
    mode.key === 'apart' ? (process.env['BENCH_HEAP_PROFILE'] ?? null) : null,
    process.env['BENCH_HEAP_SURVIVORS'] === '1',
  );
  const gcMeter = startGcMeter();
  const t = performance.now();
  const startedAtMs = Date.now();
  const { rollout: id, waves: plan } = await startRollout(server.rolloutDeps, {
    rollout: 'bench',
    resources,
    selection: { kind: 'nodes', nodes: ids },
    waves,
    maxFailures: '0',
    waveTimeoutMs: 600_000,
    startedBy: 'bench',
  });
  server.rollouts?.wake();
  // The driver drops a rollout from its list once it has recorded its end: a cheap look every
  // 5 ms, where folding the stream to see would take the engine's CPU.
  const driving = () => server.rollouts?.running().some((x) => x.id === id) ?? false;
  while (!driving()) await new Promise((r) => setTimeout(r, 1));
  while (driving()) await new Promise((r) => setTimeout(r, 5));
  const wallMs = performance.now() - t;
  const endedAtMs = Date.now();
  const gcDuring = gcMeter.stop();
  const delay = turns.stop();
  const threadCpu = { mainMs: threadCpuMs(mainTid) - cpu0.main, fleetMs: fleet.cpuMs() - cpu0.fleet };
  await heap.stop();
  await new Promise((r) => setTimeout(r, 1_000));
  const gcIdleMeter = startGcMeter();
  await new Promise((r) => setTimeout(r, idleMs));
  const gcIdle = gcIdleMeter.stop();
  const samples = await probe.stop();
  // Stopped last: handing the profile over holds the loop, and no read may wait on that.
  const cpu = await profiler.stop();
  const loop = { ...delay, longest: turns.attribute(cpu.profile, 50) };
  // A 404 is a read before the node or the rollout was folded: not the same answer, not counted.
  // Any other answer (or none: a reset socket) is counted as failed, shown beside the figures.
  const failedReads = samples.filter((x) => x.status !== 200 && x.status !== 404).length;
  const latency = (route: string): Latency => {
    const of = samples.filter((x) => x.status === 200 && paths[x.path]!.startsWith(route));
    return {
      during: of.filter((x) => x.at >= startedAtMs && x.at <= endedAtMs).map((x) => x.ms),
      idle: of.filter((x) => x.at >= endedAtMs + 1_000).map((x) => x.ms),
      failed: failedReads,
    };
  };
  const s = await readRollout(store, id);
  if (s?.status !== 'completed' || s.completed?.done !== rolloutNodes)
    throw new Error(`rollout ended ${s?.status ?? 'unknown'}: ${JSON.stringify(s?.completed ?? s?.halted)}`);
  const events = Number(((await store.headPosition()) ?? 0n) - head);
  const decisions = (await store.readStream('rollout-bench')).length;
  // Where each wave's time went, from the rollout's own events: opening → last send recorded →
  // completion (every node's matching report folded).
  const phases = s.waves.map((w) => {
    const opened = Date.parse(w.startedAt ?? '');
    const lastSend = w.lastSentAtMs ?? opened;
    const closed = Date.parse(w.completed?.completedAt ?? '');
    return { nodes: w.to - w.from, sendingMs: lastSend - opened, convergingMs: closed - lastSend };
  });
  await fleet.stop();
  await server.stop();
  await store.close();
  return {
    wallMs,
    waveCount: plan.length,
    events,
    decisions,
    phases,
    cpu,
    threadCpu,
    nodeApi: latency('/v1/nodes/'),
    rolloutApi: latency('/v1/rollouts/'),
    loop,
    gc: { during: gcDuring, idle: gcIdle },
  };
}

const r = await rollout(fleetModes[0]!);
const together = await rollout(fleetModes[1]!);
rmSync(dir, { recursive: true, force: true });

const report = createBenchReport(
  'Rollouts',
  `Sending one declaration to each of ${sends.toLocaleString('en-US')} fresh nodes on SQLite (WAL, synchronous=FULL): in bulk (${batch} nodes per append call) against one at a time (one append per node, ${inFlight} in flight) and against the store's raw batch append of the same declarations built and signed beforehand; then a rollout over ${rolloutNodes.toLocaleString('en-US')} simulated nodes on the in-process broker with the engine wired as \`serve\` wires it.`,
);
report.row({
  name: `bulk send, ${batch} nodes per transaction, vs one at a time`,
  unit: 'sends/s',
  converge: bulkRates,
  baseline: oneRates,
  notes: `baseline: src/engine/send.ts, one transaction per node. Bulk: signed ${signOnThread ? 'on the signing thread, each batch while the one before is appended' : 'on the engine thread'}; the engine thread's CPU ${bulkCpuUs.map((x) => x.toFixed(0)).join(', ')} µs a send`,
});
report.row({
  name: 'bulk send vs the raw batch append of the same declarations',
  unit: 'sends/s',
  converge: bulkRates,
  baseline: rawRates,
  notes: 'the bulk path also builds, digests and signs each declaration (Ed25519) before the append',
});
report.row({
  name: 'bulk send vs building and signing the declarations alone (no store)',
  unit: 'sends/s',
  converge: bulkRates,
  baseline: makeRates,
  notes: 'baseline: makeDeclarationSent per node (bytes, digest, Ed25519 signature), the part of a send no store can batch',
});
// The floor a rollout cannot beat: its waves' apply time on the critical path, plus sending every
// node its declaration at the bulk rate measured above. The goal is within twice that.
const bulkSendMs = (rolloutNodes / Math.max(...bulkRates)) * 1000;
const wallRow = (x: typeof r, mode: FleetMode): void => {
  const over = x.wallMs - x.waveCount * applyMs;
  report.row({
    name: `rollout, ${rolloutNodes.toLocaleString('en-US')} nodes in ${x.waveCount} waves (${waves}), ${mode.what}: wall time vs its waves' apply time plus the bulk send time`,
    unit: 's',
    converge: x.wallMs / 1000,
    baseline: (x.waveCount * applyMs + bulkSendMs) / 1000,
    better: 'lower',
    goal: { ratioAtMost: 2 },
    notes: `baseline: ${x.waveCount} waves × ${applyMs} ms of apply + ${(bulkSendMs / 1000).toFixed(2)} s to send ${rolloutNodes.toLocaleString('en-US')} declarations in bulk; orchestration overhead beyond the apply time ${(over / 1000).toFixed(2)} s (${(over / x.waveCount).toFixed(0)} ms a wave, ${((over * 1000) / rolloutNodes).toFixed(0)} µs a node, the simulated nodes' own work included: their thread's CPU ${(x.threadCpu.fleetMs / 1000).toFixed(1)} s)`,
  });
};
wallRow(r, fleetModes[0]!);
wallRow(together, fleetModes[1]!);
report.row({
  name: 'events the store took during the rollout',
  unit: 'events/s',
  converge: r.events / (r.wallMs / 1000),
  baseline: Math.max(...rawRates),
  notes: `${r.events.toLocaleString('en-US')} events (declarations, reports, ${r.decisions} of the rollout's own) in ${(r.wallMs / 1000).toFixed(2)} s; baseline: the raw batch append rate above`,
});
// The driver's CPU, per node the rollout reached. The engine's thread's CPU time is read from the
// kernel (/proc/self/task/<tid>/stat, user + system) over the rollout; the simulated fleet runs on
// a thread of its own, read the same way, so none of its work is in the engine's figure. Within
// the engine's thread, the sampling profiler says which share of its busy samples had a driver
// file on the stack, and that share of the thread's CPU time is the driver's (the samples alone
// would count time the thread waited for a core on a busy machine).
const perNode = (ms: number): number => ms / rolloutNodes;
const shareOf = (name: string): number => (r.cpu.busyMs === 0 ? 0 : ((r.cpu.ms[name] ?? 0) / r.cpu.busyMs) * r.threadCpu.mainMs);
const sendsMs = shareOf('driverSends');
const driverMs = shareOf('driver');
const s1 = (ms: number): string => (ms / 1000).toFixed(1);
report.row({
  name: 'driver CPU per node, its sends excluded (deciding, folding its stream, counting the wave)',
  unit: 'ms',
  converge: perNode(driverMs - sendsMs),
  better: 'lower',
  goal: { atMost: 0.1 },
  notes: `the engine's thread used ${s1(r.threadCpu.mainMs)} s of CPU over the rollout (the simulated fleet's thread ${s1(r.threadCpu.fleetMs)} s more, not counted); of its sampled busy time the driver's files (src/engine/rollout*.ts, sendBatch.ts, sendView.ts) were on the stack ${(((r.cpu.ms['driver'] ?? 0) / Math.max(1, r.cpu.busyMs)) * 100).toFixed(0)}%: ${s1(driverMs)} s, ${s1(sendsMs)} s of it the bulk sender's (building, signing, appending); ingest ${s1(shareOf('ingest'))} s, the projections ${s1(shareOf('projections'))} s, the relay ${s1(shareOf('relay'))} s, the in-process broker ${s1(shareOf('transport'))} s`,
});
report.row({
  name: 'driver CPU per node, its sends included, vs the bulk send alone',
  unit: 'ms',
  converge: perNode(driverMs),
  baseline: 1000 / Math.max(...bulkRates),
  better: 'lower',
  notes: 'baseline: wall time per node of the bulk send measured above (building, signing, appending 500 a call)',
});
report.row({
  name: "engine thread CPU per node over the rollout (driver, ingest, projections, relay, API, store), the fleet's thread apart",
  unit: 'ms',
  converge: perNode(r.threadCpu.mainMs),
  better: 'lower',
  notes: `the simulated fleet's thread: ${(r.threadCpu.fleetMs / rolloutNodes).toFixed(3)} ms a node (verifying, applying, reporting)`,
});
const p99 = (xs: readonly number[]): number => percentile(xs, 99);
for (const [x, mode] of [
  [r, fleetModes[0]!],
  [together, fleetModes[1]!],
] as const)
  for (const [route, l] of [
    ['GET /v1/nodes/:node', x.nodeApi],
    ['GET /v1/rollouts/:id', x.rolloutApi],
  ] as const) {
    report.row({
      name: `API p99, ${route}, while the ${rolloutNodes.toLocaleString('en-US')}-node rollout runs vs idle, ${mode.key === 'apart' ? 'the fleet apart' : "every node's work on one thread"}`,
      unit: 'ms',
      converge: p99(l.during),
      baseline: p99(l.idle),
      better: 'lower',
      goal: { ratioAtMost: 2 },
      notes: `${l.during.length.toLocaleString('en-US')} reads during (${l.failed} reads of either route failed), ${l.idle.length.toLocaleString('en-US')} idle (the ${idleMs / 1000} s after it ended, same nodes, same server); p50 ${percentile(l.during, 50).toFixed(1)} ms vs ${percentile(l.idle, 50).toFixed(1)} ms; max ${Math.max(...l.during).toFixed(0)} ms. A worker thread sends a GET every 10 ms whatever came back (open loop)`,
    });
  }
report.row({
  name: "the engine thread's CPU in one event-loop turn while the rollout runs, p99",
  unit: 'ms',
  converge: r.loop.cpuP99,
  better: 'lower',
  notes: `turns: the gaps between a 1 ms timer's ticks, the thread's CPU in each from the kernel (bench/support/longTurns.ts); max ${r.loop.cpuMax.toFixed(1)} ms. Loop delay (monitorEventLoopDelay, wall, the machine's load included): p50 ${r.loop.p50.toFixed(1)} ms, p99 ${r.loop.p99.toFixed(1)} ms, max ${r.loop.max.toFixed(0)} ms. The longest turns by CPU, the profile's samples in each by the deepest project frame (ms): ${describeTurns(r.loop.longest.slice(0, 3)).join(' · ')}`,
});
report.row({
  name: "the engine thread's scavenges (young-generation collections) while the rollout runs, longest pause",
  unit: 'ms',
  converge: r.gc.during.scavengeMaxMs,
  better: 'lower',
  notes: `v8.GCProfiler on the engine thread (bench/support/gcMeter.ts), the fleet apart. During the rollout: ${describeGc(r.gc.during, rolloutNodes)}. Idle (the ${idleMs / 1000} s after it): ${describeGc(r.gc.idle, rolloutNodes)}`,
});
report.row({
  name: "bytes promoted to the engine thread's old generation by scavenges, per node of the rollout",
  unit: 'B',
  converge: r.gc.during.promoted / rolloutNodes,
  better: 'lower',
  notes: `${(r.gc.during.promoted / 2 ** 20).toFixed(0)} MiB over the rollout; young generation allocated ${(r.gc.during.youngAllocated / rolloutNodes / 1024).toFixed(1)} KiB a node. Every node's work on one thread: ${describeGc(together.gc.during, rolloutNodes)}`,
});
for (const line of describeTurns(r.loop.longest.slice(0, 10))) console.error(`long turn ${line}`);
if (process.env['BENCH_TURNS_JSON'] !== undefined) writeFileSync(process.env['BENCH_TURNS_JSON'], JSON.stringify(r.loop.longest));
report.note(
  `Each wave of the rollout, from its events (nodes: opening → last send recorded; last send → every matching report folded): ${r.phases
    .map((p) => `${p.nodes.toLocaleString('en-US')}: ${p.sendingMs} ms; ${p.convergingMs} ms`)
    .join(
      ' · ',
    )} (the fleet apart). The simulated nodes run in a worker thread of the bench's process (bench/support/remoteFleet.ts): with every node's work on it at the engine's priority, on a two-core machine it takes one core's worth of time from whatever else runs.`,
);
report.end();
