// 100,000 nodes on one engine: builds a store of 100,000 nodes — each a declaration,
// a matching report and three alives, 500,000 events — through the engine's own event
// constructors and SQLite store, then measures what an operator meets at that size, each figure
// with its goal beside it:
//   - `converge serve` (dist, child process, no broker) cold (no snapshot) and warm (the snapshot
//     it wrote at stop): time to /readyz 200, RSS, and the time the stop took (snapshot write);
//   - the read model in this process: heap after a full GC, folded cold and restored from the
//     snapshot, and the snapshot's size and write time;
//   - on the warm serve: GET /v1/nodes pages, GET /v1/fleet, GET /metrics (median of repeats);
//   - the CLI over the same store: `status`, `forensics races`, `replay --verify`.
//   npm run bench -- scale        BENCH_NODES=100000; BENCH_SCALE_STORE=<path> keeps and reuses the built store;
//                                 BENCH_SCALE_PASSES=3 cold/warm serve starts, alternated
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import pino from 'pino';
import { generateSigningKey } from '../src/core/declaration/index.ts';
import { makeAliveSeen, makeDeclarationSent, makeReportReceived, streamOf } from '../src/core/events/index.ts';
import { createProjectionRunner } from '../src/readModel/projectionRunner.ts';
import { createSqliteEventStore } from '../src/store/sqlite/sqliteEventStore.ts';
import type { NewEvent, StreamWrite } from '../src/store/index.ts';
import { encodeReport } from '../src/core/wire/index.ts';
import { createBenchReport } from './support/report.ts';
import { spawnServe } from './support/serveProcess.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const root = new URL('..', import.meta.url).pathname;
const nodeCount = Number(process.env['BENCH_NODES'] ?? 100_000);
const keep = process.env['BENCH_SCALE_STORE'];
/** Cold and warm `serve` starts, alternated. */
const passes = Math.max(1, Number(process.env['BENCH_SCALE_PASSES'] ?? 3));
const dir = mkdtempSync(join(tmpdir(), 'converge-bench-scale-'));
const logger = pino({ level: 'silent' });

const fmt = (n: number, digits = 0): string => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const mib = (bytes: number): string => `${fmt(bytes / 1024 / 1024, 1)} MiB`;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

if (!existsSync(join(root, 'dist/src/cli/main.js'))) {
  console.error('bench/scale: dist/ is missing; run `npm run build` first');
  process.exit(1);
}

/** 100,000 nodes: a send each, then an alive, the matching report, two more alives; times move forward. */
async function build(path: string): Promise<void> {
  const store = createSqliteEventStore(path);
  const key = generateSigningKey();
  const nodes = Array.from({ length: nodeCount }, (_, i) => `node-${String(i).padStart(6, '0')}`);
  const digests = new Map<string, string>();
  const t0 = Date.parse('2026-01-01T00:00:00Z');
  // Ten specs, so the fleet has cohorts to group (docs/design.md §2: the spec digest groups).
  const specs = Array.from({ length: 10 }, (_, i) => [{ id: 'web', image: `web:${i}` }, { id: 'db' }]);
  const rounds: ((node: string, i: number, at: Date) => NewEvent)[] = [
    (node, i, at) => {
      const e = makeDeclarationSent({ node, serial: 1, resources: specs[i % specs.length]!, key, now: at });
      digests.set(node, e.data.digest);
      return e;
    },
    (node, _i, at) => makeAliveSeen({ node }, at),
    (node, i, at) => {
      const report = { node, applied: ['web', 'db'], failed: {}, refused: '', carried: [8080], declared: digests.get(node)! };
      return makeReportReceived(report, encodeReport(report), { messageId: `m-${i}`, redelivered: false, userId: node }, at);
    },
    (node, _i, at) => makeAliveSeen({ node }, at),
    (node, _i, at) => makeAliveSeen({ node }, at),
  ];
  let clock = t0;
  for (const [r, make] of rounds.entries()) {
    for (let i = 0; i < nodes.length; i += 2_000) {
      const writes: StreamWrite[] = nodes.slice(i, i + 2_000).map((node, j) => {
        clock += 1;
        return { stream: streamOf(node), expected: 'any', events: [make(node, i + j, new Date(clock + r * 20_000))] };
      });
      await store.append(writes);
    }
  }
  await store.close();
}

function get(url: string): Promise<{ status: number; bytes: number; body: string; ms: number }> {
  const t = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(url, { agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const body = Buffer.concat(chunks);
        resolve({ status: res.statusCode ?? 0, bytes: body.length, body: body.toString(), ms: performance.now() - t });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

const rssOf = (pid: number): number => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN) * 1024;

type Serve = Readonly<{ url: string; readyMs: number; rss: number; stop: () => Promise<number> }>;

/** serve over the store (no broker): time from spawn to /readyz 200. `stop` resolves with how long the stop took. */
async function startServe(storePath: string): Promise<Serve> {
  const t0 = performance.now();
  const { proc, url, exited } = await spawnServe(root, storePath);
  while ((await get(`${url}/readyz`)).status !== 200) await sleep(10);
  const readyMs = performance.now() - t0;
  return {
    url,
    readyMs,
    rss: rssOf(proc.pid!),
    stop: async () => {
      const s = performance.now();
      proc.kill('SIGTERM');
      await exited;
      return performance.now() - s;
    },
  };
}

/** A CLI command over the store, timed from spawn to exit; output is read and thrown away. */
async function cli(args: readonly string[], storePath: string): Promise<{ ms: number; code: number | null; tail: string }> {
  const t0 = performance.now();
  const proc = spawn(process.execPath, ['bin/converge.js', ...args, '--store', `sqlite:${storePath}`], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let tail = '';
  proc.stdout.on('data', (c: Buffer) => (tail = (tail + c.toString()).slice(-300)));
  proc.stderr.on('data', (c: Buffer) => (tail = (tail + c.toString()).slice(-300)));
  const code = await new Promise<number | null>((r) => proc.once('exit', (c) => r(c)));
  return { ms: performance.now() - t0, code, tail: tail.trim() };
}

/** A full GC once pending timers (a stopped subscription's last wait) have let go of what they held. */
async function settledGc(): Promise<void> {
  await sleep(300);
  gc();
}

type InProcess = { heap: number; ms: number; write?: { ms: number; bytes: number; stallMs: number } };

/** Fold (or restore) in this process; with `writeSnapshot`, then write its snapshot, timed, watching the event loop's longest stall. */
async function heapOfReadModel(storePath: string, snapshotPath: string, restore: boolean, writeSnapshot = false): Promise<InProcess> {
  await settledGc();
  const before = process.memoryUsage().heapUsed;
  const store = createSqliteEventStore(storePath);
  const t = performance.now();
  const runner = createProjectionRunner({ store, logger, snapshot: { path: snapshotPath, everyEvents: 1e12 } });
  await runner.start();
  await runner.caughtUp();
  const ms = performance.now() - t;
  // A restore builds each node's state when it is first asked for: ask for every one, so the heap
  // compared with the folded model's holds the same states (and `ms` is still the restore's time).
  let built = 0;
  for (const _ of runner.readModel.nodes()) built++;
  if (built !== runner.readModel.size()) throw new Error('not every node was built');
  let write: InProcess['write'];
  if (writeSnapshot) {
    // The snapshot `serve` writes every N events and at stop, of this model, to `snapshotPath`.
    // The monitor records a stall only between two of its own ticks: let it tick before the write
    // starts and after it ends, or a block at either end goes unseen.
    const delay = monitorEventLoopDelay({ resolution: 5 });
    delay.enable();
    await sleep(50);
    const w = performance.now();
    await runner.writeSnapshot();
    const wms = performance.now() - w;
    await sleep(50);
    delay.disable();
    write = { ms: wms, bytes: existsSync(snapshotPath) ? statSync(snapshotPath).size : 0, stallMs: delay.max / 1e6 };
  }
  await runner.stop();
  await store.close();
  await settledGc();
  const heap = process.memoryUsage().heapUsed - before;
  if (restore && runner.readModel.size() !== nodeCount) throw new Error('restore did not give every node');
  // Kept alive until measured.
  if (runner.readModel.size() === 0) throw new Error('empty read model');
  return { heap, ms, ...(write === undefined ? {} : { write }) };
}

try {
  const storePath = keep ?? join(dir, 'scale.db');
  if (!existsSync(storePath)) {
    process.stdout.write(`building a ${fmt(nodeCount)}-node store (${fmt(nodeCount * 5)} events) through the engine's own code… `);
    const t = performance.now();
    await build(storePath);
    console.log(`${fmt((performance.now() - t) / 1000, 1)} s`);
  }
  console.log(`${fmt(nodeCount)} nodes, ${fmt(nodeCount * 5)} events, store ${mib(statSync(storePath).size)}; machine shared (2 cores)`);

  // serve works on a copy, so the snapshot it writes never touches a kept store's neighbour.
  const servePath = join(dir, 'serve.db');
  copyFileSync(storePath, servePath);
  const snapPath = `${servePath}.snapshot`;
  // Alternating passes (cold, then warm on the snapshot the cold one wrote at its stop), so neither
  // side always gets the quieter machine; the last warm serve stays up for the API rows.
  const coldMs: number[] = [];
  const warmMs: number[] = [];
  const stopMs: number[] = [];
  let coldRss = 0;
  let snapBytes = 0;
  let warm: Serve | null = null;
  for (let pass = 0; pass < passes; pass++) {
    rmSync(snapPath, { force: true });
    const cold = await startServe(servePath);
    coldMs.push(cold.readyMs);
    coldRss = cold.rss;
    stopMs.push(await cold.stop());
    snapBytes = existsSync(snapPath) ? statSync(snapPath).size : 0;
    warm = await startServe(servePath);
    warmMs.push(warm.readyMs);
    if (pass < passes - 1) {
      await warm.stop();
      warm = null;
    }
  }
  if (warm === null) throw new Error('no warm serve');

  const report = createBenchReport(
    `Scale: ${fmt(nodeCount)} nodes on one engine`,
    `A SQLite store of ${fmt(nodeCount)} nodes (${fmt(nodeCount * 5)} events: a declaration, a matching report and three alives ` +
      "each, built through the engine's own code): `converge serve` (dist, a child process, no broker) cold and warm, its API " +
      'on the warm serve (median of repeats), the read model in process, and the CLI over the same store. Most rows have no ' +
      'baseline: each goal is absolute; the warm start is measured against the cold one.',
  );
  const secs = (ms: number): number => ms / 1000;
  const mb = (bytes: number): number => bytes / 1e6;
  report.row({
    name: 'serve: cold start (no snapshot) → /readyz 200',
    unit: 's',
    better: 'lower',
    converge: coldMs.map(secs),
    notes: `RSS ${mib(coldRss)}`,
  });
  report.row({
    name: 'serve: warm start (snapshot) → /readyz 200, against the cold start',
    unit: 's',
    better: 'lower',
    converge: warmMs.map(secs),
    baseline: coldMs.map(secs),
    goal: { ratioAtMost: 0.2 },
    notes: `≥ 5× faster than cold; RSS ${mib(warm.rss)}`,
  });
  report.row({
    name: 'serve: stop (writes the snapshot)',
    unit: 's',
    better: 'lower',
    converge: stopMs.map(secs),
    notes: `snapshot ${mib(snapBytes)}`,
  });

  const pages: number[] = [];
  const mids: number[] = [];
  const filtered: number[] = [];
  let pageBytes = 0;
  let total = '';
  for (let k = 0; k < 20; k++) {
    const p = await get(`${warm.url}/v1/nodes?limit=500`);
    pages.push(p.ms);
    pageBytes = p.bytes;
    const body = JSON.parse(p.body) as { total?: number };
    total = body.total === undefined ? 'no total' : `total ${fmt(body.total)}`;
    mids.push((await get(`${warm.url}/v1/nodes?limit=500&after=node-050000`)).ms);
    filtered.push((await get(`${warm.url}/v1/nodes?limit=500&status=converged&liveness=disconnected`)).ms);
  }
  const fleet: number[] = [];
  let fleetBytes = 0;
  for (let k = 0; k < 10; k++) {
    const f = await get(`${warm.url}/v1/fleet`);
    fleet.push(f.ms);
    fleetBytes = f.bytes;
  }
  const metrics: number[] = [];
  let metricsBytes = 0;
  for (let k = 0; k < 10; k++) {
    const m = await get(`${warm.url}/metrics`);
    metrics.push(m.ms);
    metricsBytes = m.bytes;
  }
  report.row({
    name: 'GET /v1/nodes?limit=500 (first page)',
    unit: 'ms',
    better: 'lower',
    converge: median(pages),
    notes: `${fmt(pageBytes / 1024)} KiB, ${total}; goal: a page in a few ms`,
  });
  report.row({ name: 'GET /v1/nodes?limit=500&after=node-050000', unit: 'ms', better: 'lower', converge: median(mids) });
  report.row({ name: 'GET /v1/nodes?status=…&liveness=… (filtered)', unit: 'ms', better: 'lower', converge: median(filtered) });
  report.row({
    name: 'GET /v1/fleet',
    unit: 'ms',
    better: 'lower',
    converge: median(fleet),
    notes: `${fmt(fleetBytes / 1024, 1)} KiB; goal: small and O(1)`,
  });
  report.row({
    name: 'GET /metrics',
    unit: 'ms',
    better: 'lower',
    converge: median(metrics),
    notes: `${fmt(metricsBytes / 1024, 1)} KiB; goal: O(series), not O(nodes)`,
  });
  await warm.stop();

  const coldHeap = await heapOfReadModel(storePath, join(dir, 'inprocess.snapshot'), false, true);
  const warmHeap = await heapOfReadModel(storePath, snapPath, true);
  report.row({
    name: 'read model heap after a full GC, folded from zero',
    unit: 'MB',
    better: 'lower',
    converge: mb(coldHeap.heap),
    goal: { atMost: 200 },
    notes: `in ${fmt(coldHeap.ms / 1000, 2)} s; moonshot < 100 MB`,
  });
  report.row({
    name: 'read model heap after a full GC, restored from the snapshot, against folded from zero',
    unit: 'MB',
    better: 'lower',
    converge: mb(warmHeap.heap),
    baseline: mb(coldHeap.heap),
    goal: { ratioAtMost: 1.1 },
    notes: `in ${fmt(warmHeap.ms / 1000, 2)} s (every state then built, as a restore builds them when asked); a restore must not inflate the heap; < 200 MB, moonshot < 100 MB`,
  });

  const w = coldHeap.write;
  if (w !== undefined) {
    report.row({
      name: 'snapshot: write in process (encoded in slices, the event loop free between them)',
      unit: 's',
      better: 'lower',
      converge: secs(w.ms),
      notes: `${mib(w.bytes)}; longest event-loop stall while writing ${fmt(w.stallMs, 1)} ms (goal: off the hot path, < 50 ms)`,
    });
  }
  // The format serve wrote: the header line's.
  const snapFormat = existsSync(snapPath)
    ? (/"format":(\d+)/.exec(readFileSync(snapPath).subarray(0, 64).toString('latin1'))?.[1] ?? '?')
    : '?';
  report.row({
    name: 'snapshot: size on disk',
    unit: 'MB',
    better: 'lower',
    converge: mb(snapBytes),
    notes: `${fmt(snapBytes / nodeCount)} B per node, format ${snapFormat}`,
  });

  for (const [label, args, goalSeconds] of [
    ['CLI: status (every node)', ['status', '--json'], null],
    ['CLI: forensics races', ['forensics', 'races'], null],
    // 1,000,000 events in under 6 s, scaled to this store.
    ['CLI: replay --verify (against the snapshot)', ['replay', '--verify', '--snapshot', snapPath], nodeCount * 5 * 6e-6],
  ] as const) {
    const r = await cli(args, servePath);
    report.row({
      name: label,
      unit: 's',
      better: 'lower',
      converge: secs(r.ms),
      ...(goalSeconds === null ? {} : { goal: { atMost: goalSeconds } }),
      ...(r.code === 0 ? {} : { notes: `exit ${r.code}: ${r.tail}` }),
    });
  }
  report.end();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
