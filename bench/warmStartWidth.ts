// The warm start at the end of a year, at the fleet's real width. A node's state in the read model,
// and so in the snapshot, keeps its last `sendHistoryLimit` sends and `recentLatencyLimit` report
// latencies and grows no further (projections/node/nodeState.ts): once every node has had that many
// rounds, a longer history cannot make the snapshot wider, and a warm start reads the snapshot, not
// the history — but for its cross-check, a few nodes' streams up to an event budget that a year's
// streams reach and 17 rounds' do not, so the check is also timed at its budget. So the year's end
// is measured without a year: a store of 100,000 nodes that have each had BENCH_WARM_ROUNDS rounds
// (default one more than fills the bounds) against a store of the same nodes after one round, both
// written through the engine's own code (event constructors, the liveness recorder, the SQLite
// store's append in calls of 2,000 writes). A round is a day: each node heard (NodeHeard), sent a
// declaration, reporting on it 30 minutes later, then silent (NodeSilent) until the next day.
// Measured on both stores in turn, passes alternating: `converge serve` (dist, a child process, no
// broker) from spawn to /readyz 200 on the snapshot the previous stop wrote, with its CPU and RSS
// then, and the stop after the cold start (which writes the snapshot); and in this process the
// store opened and the read model restored from the snapshot (wall and CPU), then every node's
// state built.
//   npm run bench -- warmStartWidth   CONVERGE_BENCH_SCALE (1 = 100,000 nodes), BENCH_WARM_ROUNDS (17),
//                                     BENCH_WARM_PASSES (3), BENCH_WARM_STORES=<dir> keeps and reuses the built stores
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { request } from 'node:http';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { openSnapshot } from '../src/readModel/snapshot/snapshotFile.ts';
import { crossCheck, crossCheckBudgetFor, crossCheckSamples } from '../src/readModel/snapshot/trust.ts';
import { recentLatencyLimit, sendHistoryLimit } from '../projections/index.ts';
import { createSqliteEventStore } from '../src/store/sqlite/sqliteEventStore.ts';
import { buildDailyRounds, roundsGraceMs } from './support/dailyRounds.ts';
import { createBenchReport } from './support/report.ts';
import { spawnServe } from './support/serveProcess.ts';
import { restoreFromSnapshot } from './support/historyStores.ts';

const root = new URL('..', import.meta.url).pathname;
const scale = Number(process.env['CONVERGE_BENCH_SCALE'] ?? 1);
const nodeCount = Math.max(10, Math.round(100_000 * scale));
/** Rounds after which every node's bounded state is full: one send and one report a round. */
const fullRounds = Math.max(sendHistoryLimit, recentLatencyLimit);
const rounds = Math.max(2, Number(process.env['BENCH_WARM_ROUNDS'] ?? fullRounds + 1));
const passes = Math.max(1, Number(process.env['BENCH_WARM_PASSES'] ?? 3));
const keep = process.env['BENCH_WARM_STORES'];
const dir = keep ?? mkdtempSync(join(tmpdir(), 'converge-bench-warm-width-'));
const fmt = (n: number, digits = 0): string => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const mib = (bytes: number): number => bytes / 1024 / 1024;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const nodes = Array.from({ length: nodeCount }, (_, i) => `node-${String(i).padStart(6, '0')}`);

if (!existsSync(join(root, 'dist/src/cli/main.js'))) {
  console.error('bench/warmStartWidth: dist/ is missing; run `npm run build` first');
  process.exit(1);
}

function get(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

const clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
/** RSS (bytes) and CPU seconds (user + system, every thread) of a live process, from /proc. */
function procOf(pid: number): { rss: number; cpuS: number } {
  const rss = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN) * 1024;
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command's closing parenthesis, from the state (field 3): utime is 14, stime 15.
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { rss, cpuS: (Number(f[11]) + Number(f[12])) / clockTicks };
}

type ServeStart = Readonly<{ readyS: number; cpuS: number; rss: number; stopS: number }>;

/** serve over the store (no broker): spawn to /readyz 200, its CPU and RSS then; then stopped (it writes its snapshot), timed. */
async function serveStart(storePath: string): Promise<ServeStart> {
  const t0 = performance.now();
  const { proc, url, exited } = await spawnServe(root, storePath);
  while ((await get(`${url}/readyz`)) !== 200) await sleep(10);
  const readyS = (performance.now() - t0) / 1000;
  const { rss, cpuS } = procOf(proc.pid!);
  const s = performance.now();
  proc.kill('SIGTERM');
  await exited;
  return { readyS, cpuS, rss, stopS: (performance.now() - s) / 1000 };
}

type InProcess = Readonly<{ wallS: number; cpuS: number; buildAllS: number; full: boolean }>;

/**
 * The store opened and the read model restored from the snapshot and caught up, wall and CPU of
 * this process; then every node's state built (a restore builds each when first asked for), and
 * whether the first node's bounded state is full.
 */
async function inProcessStart(path: string): Promise<InProcess> {
  const { runner, wallS, cpuS, close } = await restoreFromSnapshot(path);
  const b = performance.now();
  let built = 0;
  for (const _ of runner.readModel.nodes()) built++;
  const buildAllS = (performance.now() - b) / 1000;
  if (built !== nodeCount) throw new Error(`warm start gave ${built} nodes`);
  const first = runner.readModel.get(nodes[0]!)!;
  const full = first.convergence.recentLatenciesMs.length === recentLatencyLimit && first.earlierSends.length === sendHistoryLimit - 1;
  await close();
  return { wallS, cpuS, buildAllS, full };
}

type Check = Readonly<{ ms: number; events: number; nodes: number }>;

/**
 * The restore's cross-check (src/readModel/snapshot/trust.ts) on the full store, as the restore runs
 * it (24 nodes, their whole streams) and as it runs at a year's end, when a node's stream is longer
 * than the budget over 24 and the budget binds: here more, shorter streams read up to the same
 * number of events (more reads for the same events, so no cheaper than a year's).
 */
async function crossChecks(path: string): Promise<{ asHere: Check; atBudget: Check }> {
  const store = createSqliteEventStore(path);
  try {
    const snap = await openSnapshot(`${path}.snapshot`);
    if (snap === null) throw new Error('no snapshot');
    const budget = crossCheckBudgetFor(snap.states.length);
    const timed = async (samples: number): Promise<Check> => {
      const t = performance.now();
      const r = await crossCheck(store, snap, samples, budget);
      return { ms: performance.now() - t, events: r.eventsRead, nodes: r.checked };
    };
    // Enough nodes that their streams (each as long as the first node's) fill the budget.
    const streamLength = Number(snap.states.state(0).revision) + 1;
    return {
      asHere: await timed(crossCheckSamples),
      atBudget: await timed(Math.max(crossCheckSamples, Math.ceil(budget / streamLength) + 1)),
    };
  } finally {
    await store.close();
  }
}

const sizeOf = (p: string): number => (existsSync(p) ? statSync(p).size : 0);
const storeBytes = (p: string): number => sizeOf(p) + sizeOf(`${p}-wal`);

try {
  if (keep !== undefined) mkdirSync(keep, { recursive: true });
  const stores = { one: { rounds: 1, path: '' }, full: { rounds, path: '' } };
  const built: Record<'one' | 'full', { events: number; s: number; cpuS: number }> = {
    one: { events: 0, s: 0, cpuS: 0 },
    full: { events: 0, s: 0, cpuS: 0 },
  };
  for (const side of ['one', 'full'] as const) {
    const s = stores[side];
    s.path = join(dir, `warm-${nodeCount}-${s.rounds}.db`);
    if (existsSync(s.path)) continue;
    process.stdout.write(`building ${fmt(nodeCount)} nodes × ${s.rounds} round(s) through the engine's own code… `);
    const t = performance.now();
    const cpu0 = process.cpuUsage();
    const events = await buildDailyRounds(s.path, nodes, s.rounds);
    const cpu = process.cpuUsage(cpu0);
    built[side] = { events, s: (performance.now() - t) / 1000, cpuS: (cpu.user + cpu.system) / 1e6 };
    console.log(
      `${fmt(events)} events in ${fmt(built[side].s, 1)} s, ${fmt(built[side].cpuS, 1)} CPU s (${fmt(events / built[side].s)} events/s)`,
    );
  }
  // A cold serve first (no snapshot): it folds the store from zero and writes the snapshot the warm starts read.
  const cold: Record<'one' | 'full', ServeStart | null> = { one: null, full: null };
  for (const side of ['one', 'full'] as const) {
    rmSync(`${stores[side].path}.snapshot`, { force: true });
    cold[side] = await serveStart(stores[side].path);
    console.log(`cold serve, ${side === 'one' ? '1 round' : `${rounds} rounds`}: ready in ${fmt(cold[side].readyS, 1)} s`);
  }

  // Passes alternate between the stores (and which goes first), so neither always gets the quieter machine.
  const serve = { one: [] as ServeStart[], full: [] as ServeStart[] };
  const inProc = { one: [] as InProcess[], full: [] as InProcess[] };
  const checks: { asHere: Check; atBudget: Check }[] = [];
  const load: number[] = [];
  for (let p = 0; p < passes; p++) {
    const order = p % 2 === 0 ? (['full', 'one'] as const) : (['one', 'full'] as const);
    for (const side of order) serve[side].push(await serveStart(stores[side].path));
    for (const side of order) inProc[side].push(await inProcessStart(stores[side].path));
    checks.push(await crossChecks(stores.full.path));
    load.push(loadavg()[0]!);
  }
  if (!inProc.full.every((r) => r.full) && rounds >= fullRounds) throw new Error('the full store’s node state is not full');

  const snap = { one: sizeOf(`${stores.one.path}.snapshot`), full: sizeOf(`${stores.full.path}.snapshot`) };
  const report = createBenchReport(
    `Warm start at the fleet's width: ${fmt(nodeCount)} nodes after ${rounds} rounds against after one`,
    `Two SQLite stores of ${fmt(nodeCount)} nodes written through the engine's own code, a round a day per node (heard, a ` +
      `declaration, its report, silent): one after ${rounds} rounds, each node's bounded state in the snapshot full (its last ` +
      `${sendHistoryLimit} sends, ${recentLatencyLimit} report latencies), which no longer history can widen; the baseline after one ` +
      'round. `converge serve` (dist, a child process, no broker) warm, spawn to /readyz 200 on the snapshot its last stop wrote, ' +
      'and the read model restored in process; passes alternate between the stores. The year-end warm start: ≤ 2 s, and the same as after a day.',
  );
  const pick = (xs: ServeStart[], f: (s: ServeStart) => number): number[] => xs.map(f);
  const lastRss = (xs: ServeStart[]): number => mib(xs[xs.length - 1]!.rss);
  report.row({
    name: `serve: warm start → /readyz 200, after ${rounds} rounds, against after one`,
    unit: 's',
    better: 'lower',
    converge: pick(serve.full, (s) => s.readyS),
    baseline: pick(serve.one, (s) => s.readyS),
    goal: { atMost: 2 },
    notes:
      `the same as after one round is the goal too: the CPU row below; cold (no snapshot, one start each) ` +
      `${fmt(cold.full!.readyS, 1)} s against ${fmt(cold.one!.readyS, 1)} s; load average (1 min) ${load.map((l) => fmt(l, 1)).join(', ')}`,
  });
  report.row({
    name: `serve: warm start's CPU to /readyz 200, after ${rounds} rounds, against after one`,
    unit: 's',
    better: 'lower',
    converge: pick(serve.full, (s) => s.cpuS),
    baseline: pick(serve.one, (s) => s.cpuS),
    goal: { ratioAtMost: 1.25 },
    notes: `every thread of the serve process, from /proc (${fmt(1000 / clockTicks)} ms ticks); "the same" is the goal, 1.25 the noise allowed`,
  });
  report.row({
    name: `serve: RSS at /readyz 200 (warm), after ${rounds} rounds, against after one`,
    unit: 'MiB',
    better: 'lower',
    converge: serve.full.map((s) => mib(s.rss)),
    baseline: serve.one.map((s) => mib(s.rss)),
    notes: `last pass ${fmt(lastRss(serve.full), 1)} against ${fmt(lastRss(serve.one), 1)} MiB`,
  });
  report.row({
    name: `serve: stop after the cold start (writes the snapshot), after ${rounds} rounds, against after one`,
    unit: 's',
    better: 'lower',
    converge: cold.full!.stopS,
    baseline: cold.one!.stopS,
    notes: 'a warm serve stopped at once writes nothing (its read model is where the snapshot is)',
  });
  report.row({
    name: `snapshot size, after ${rounds} rounds, against after one`,
    unit: 'MB',
    better: 'lower',
    converge: snap.full / 1e6,
    baseline: snap.one / 1e6,
    notes: `${fmt(snap.full / nodeCount)} B per node against ${fmt(snap.one / nodeCount)}; the one serve wrote at its last stop`,
  });
  report.row({
    name: `in process: open the store, restore the snapshot, catch up, after ${rounds} rounds, against after one`,
    unit: 's',
    better: 'lower',
    converge: inProc.full.map((r) => r.wallS),
    baseline: inProc.one.map((r) => r.wallS),
    goal: { atMost: 2 },
    notes: `CPU best ${fmt(Math.min(...inProc.full.map((r) => r.cpuS)), 3)} s against ${fmt(Math.min(...inProc.one.map((r) => r.cpuS)), 3)} s`,
  });
  report.row({
    name: `in process: the restore's CPU, after ${rounds} rounds, against after one`,
    unit: 's',
    better: 'lower',
    converge: inProc.full.map((r) => r.cpuS),
    baseline: inProc.one.map((r) => r.cpuS),
    goal: { ratioAtMost: 1.25 },
  });
  report.row({
    name: `in process: every node's state built after the restore, after ${rounds} rounds, against after one`,
    unit: 's',
    better: 'lower',
    converge: inProc.full.map((r) => r.buildAllS),
    baseline: inProc.one.map((r) => r.buildAllS),
    notes: 'a restore builds a state when first asked for (a node page, the fleet view); this asks for all of them',
  });
  const best = (xs: readonly number[]): number => Math.min(...xs);
  const checkHere = checks[0]!.asHere;
  const checkYear = checks[0]!.atBudget;
  const extraS = Math.max(0, best(checks.map((c) => c.atBudget.ms)) - best(checks.map((c) => c.asHere.ms))) / 1000;
  report.row({
    name: `the restore's cross-check as at a year's end (its event budget read), against as after ${rounds} rounds`,
    unit: 'ms',
    better: 'lower',
    converge: checks.map((c) => c.atBudget.ms),
    baseline: checks.map((c) => c.asHere.ms),
    notes:
      `${fmt(checkYear.events)} events of ${fmt(checkYear.nodes)} nodes against ${fmt(checkHere.events)} of ${fmt(checkHere.nodes)}: ` +
      `a year's streams (~1,500 events each) pass the budget, so the year's check reads the whole budget, here the same number of ` +
      `events from shorter streams; the year-end serve warm start is then about ` +
      `${fmt(best(pick(serve.full, (s) => s.readyS)) + extraS, 2)} s (best above + ${fmt(extraS * 1000)} ms)`,
  });
  const builtNote = (side: 'one' | 'full'): string =>
    built[side].events === 0
      ? 'reused'
      : `${fmt(built[side].events)} events built in ${fmt(built[side].s, 1)} s, ${fmt(built[side].cpuS, 1)} CPU s`;
  report.note(
    `Stores: after ${rounds} rounds ${fmt(storeBytes(stores.full.path) / 1e6, 1)} MB (${builtNote('full')}), after one ` +
      `${fmt(storeBytes(stores.one.path) / 1e6, 1)} MB (${builtNote('one')}). A round: NodeHeard at 08:00, DeclarationSent at 09:00, ` +
      `its ReportReceived at 09:30, NodeSilent at 12:00 (the liveness recorder, grace ${roundsGraceMs / 1000} s). The machine is shared (2 cores): ` +
      'read the CPU rows for "the same", the wall rows for the 2 s goal.',
  );
  report.end();
} finally {
  if (keep === undefined) rmSync(dir, { recursive: true, force: true });
}
