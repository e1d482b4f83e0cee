// The whole engine as users run it: `converge serve` — the built dist CLI, as a child
// process — over RabbitMQ and SQLite, draining N prefilled reports, against the minimal pipeline
// (quorum queue → JSON.parse → better-sqlite3 batch of 500, WAL, FULL → ack;
// bench/engine/minimalPipeline.ts) on the same broker and disk, in the same run, alternating
// passes. Both are timed from outside, the same way: the drain starts when the queue's ready
// count first drops (AMQP passive declare, polled every 2 ms) and ends when the engine's
// /healthz position reaches the last report's event (every report folded, so visible in the
// API) or the baseline says it committed the last row. CPU is the child's utime + stime over the
// drain (/proc/<pid>/stat), per report, with its main thread's alone beside it (serve writes SQLite
// on a thread of its own), and the local broker's (the two cores are shared with it).
//
// Then, on a serve under a steady load: report → visible latency (publish → the report's state
// arrives on GET /v1/events) and `await` wake-up (publish of the matching report → the pending
// GET /v1/nodes/:node/await answers), p50/p99.
//
//   npm run bench -- engine          BENCH_REPORTS=50000 BENCH_PASSES=3 BENCH_RATE=1000 BENCH_SECONDS=10
//   BENCH_TRACING=1: also serve --tracing on (spans to a local OTLP sink), read against serve with tracing off
//   BENCH_WITHOUT_AUDIT_TREE=1 (bench only): also serve with its SQLite store appending without the audit
//   tree (a one-line module preloaded into that serve alone sets withoutAuditTreeKey), read as serve with
//   the tree against without: what the tree costs ingest (docs/audit.md#what-the-tree-costs-an-append)
//   BENCH_BEFORE_ROOT=<checkout>: also serve from another built checkout (say, the commit before a
//   change), read against this one: a change's cost measured in one run, passes alternating
//   (`npm run build` first: the engine runs from dist/, as `converge serve` does)
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import amqp from 'amqplib';
import pino from 'pino';
import { createManagementClient, seg } from '../src/brokerAdmin/managementClient.ts';
import { generateSigningKey, signingKeyToPem } from '../src/core/declaration/index.ts';
import { withoutAuditTreeKey } from '../src/store/sqlite/sqliteEventStore.ts';
import { connectAmqp } from '../src/transport/amqpConnection.ts';
import { meshTopology } from '../src/transport/topology.ts';
import { createScratchVhost, defaultBroker } from '../test/support/broker.ts';
import { children, cpuMicros, findBrokerPid, httpGet, sleep, startChild, waitForLine } from './engine/children.ts';
import type { Child } from './engine/children.ts';
import { measureLatency } from './engine/latency.ts';
import { fillQueue, prefillStore, reportBody } from './engine/prefill.ts';
import { createBenchReport } from './support/report.ts';

const root = new URL('..', import.meta.url).pathname;
const total = Number(process.env['BENCH_REPORTS'] ?? 50_000);
const passes = Number(process.env['BENCH_PASSES'] ?? 3);
const rate = Number(process.env['BENCH_RATE'] ?? 1_000);
const seconds = Number(process.env['BENCH_SECONDS'] ?? 10);
const probes = Number(process.env['BENCH_AWAIT_PROBES'] ?? 40);
const logger = pino({ level: 'silent' });

if (!existsSync(join(root, 'dist/src/cli/main.js'))) {
  console.error('bench/engine: dist/ is missing; run `npm run build` first');
  process.exit(1);
}

const scratch = await createScratchVhost('converge-bench-engine');
const admin = createManagementClient({ managementUrl: scratch.managementUrl });
const dir = mkdtempSync(join(tmpdir(), 'converge-bench-engine-'));
// One broker user that may publish with any user_id (RabbitMQ's `impersonator` tag), so every
// report carries its node's user_id as a real node's would and the engine's sender check runs.
const publisherUser = `bench-publisher-${randomBytes(4).toString('hex')}`;
const publisherPass = randomBytes(16).toString('hex');
const brokerPid = findBrokerPid();

const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');
const report = createBenchReport(
  'Engine: converge serve against the minimal pipeline',
  `\`converge serve\` (the built dist CLI, a child process) over RabbitMQ and SQLite draining ${fmt(total)} prefilled reports, ` +
    'against the minimal pipeline (quorum queue → JSON.parse → better-sqlite3 batch of 500, WAL, FULL → ack; ' +
    'bench/engine/minimalPipeline.ts) on the same broker and disk, alternating passes; both timed from outside, from the ' +
    "queue's first drop to every report folded (serve's /healthz position) or committed (the baseline). Then report → " +
    `visible and \`await\` latency on a serve under a steady load of ${fmt(rate)} reports/s (no baseline: the goal is absolute).`,
);

type Scenario = Readonly<{ name: string; nodes: readonly string[] }>;

const key = generateSigningKey();
const keyPath = join(dir, 'key.pem');

const publisherUrl = (): string =>
  `amqp://${seg(publisherUser)}:${publisherPass}@${new URL(defaultBroker.amqpUrl).host}/${seg(scratch.vhost)}`;

/**
 * `converge serve` on a store. `perNode` is the most reports any node sends in the run: the
 * per-node budget (default 20/s, burst 1,000) would shed the rest of a one-node drain
 * to mesh.dead and the drain would never end, so the burst is raised to hold them. The budget
 * still runs on every report, as it does for users; it only has nothing to refuse.
 */
function startServe(
  storePath: string,
  perNode: number,
  sqliteSync: 'thread' | 'group' | 'full' = 'thread',
  tracing = false,
  from = root,
  withoutTree = false,
): Child & { url: Promise<string> } {
  const c = startChild(
    root,
    [
      // e.g. BENCH_SERVE_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" to see where serve's time goes
      ...(process.env['BENCH_SERVE_NODE_ARGS']?.split(' ').filter((a) => a !== '') ?? []),
      ...(withoutTree ? [`--import=${withoutTreePreload}`] : []),
      join(from, 'bin/converge.js'),
      'serve',
      '--store',
      `sqlite:${storePath}`,
      '--amqp',
      scratch.amqpUrl,
      '--port',
      '0',
      '--log-level',
      'warn',
      '--signing-key',
      keyPath,
      '--node-report-burst',
      String(Math.max(1_000, perNode * 2)),
      '--sqlite-sync',
      sqliteSync,
      // OTLP/HTTP to the bench's own sink (OTEL_EXPORTER_OTLP_ENDPOINT, set below).
      ...(tracing ? ['--tracing', 'on'] : []),
    ],
    'stderr',
  );
  return { ...c, url: waitForLine(c.lines, /converge serving on (\S+)/).then((m) => m[1]!) };
}

type Drain = Readonly<{ seconds: number; cpuPerReport: number; mainCpuPerReport: number; brokerCpuPerReport: number | null }>;

/** Reports found back in mesh.reports at the start of a pass (taken but never acked by the one before). */
const leftovers: string[] = [];
let previous: string | null = null;

/** Start the consumer on a full queue; time from the first message taken to the last one visible. */
async function drain(kind: Side, scenario: Scenario, pass: number): Promise<Drain> {
  const path = join(dir, `${kind}-${scenario.name}-${pass}.db`);
  const { head, digests } = await prefillStore(path, scenario.nodes, key);
  const conn = await amqp.connect(scratch.amqpUrl);
  const ch = await conn.createChannel();
  // What the previous pass's consumer had taken but not acked when it stopped comes back to the
  // queue once its connection closes: the next pass must start from exactly `total`.
  const { messageCount: left } = await ch.purgeQueue('mesh.reports');
  if (left > 0) leftovers.push(`${left} after ${previous ?? 'an earlier run'}`);
  previous = `${kind} pass ${pass + 1} (${scenario.name})`;
  await fillQueue(publisherUrl(), scenario.nodes, digests, total, `${kind}-${scenario.name}-${pass}`);
  const depth = async (): Promise<number> => (await ch.checkQueue('mesh.reports')).messageCount;
  if ((await depth()) !== total) throw new Error(`queue holds ${await depth()} reports, expected ${total}`);

  let child: Child;
  let done: () => Promise<void>;
  if (kind !== 'baseline') {
    const serve = startServe(
      path,
      Math.ceil(total / scenario.nodes.length),
      kind === 'engine-group' ? 'group' : 'thread',
      kind === 'engine-traced',
      kind === 'engine-before' ? beforeRoot! : root,
      kind === 'engine-untreed',
    );
    child = serve;
    const target = head + BigInt(total);
    done = async () => {
      const url = await serve.url;
      const stalled = stallGuard(`serve's /healthz position to reach ${target}`);
      for (;;) {
        const r = await httpGet(`${url}/healthz`);
        const h = JSON.parse(r.body) as { position: string | null };
        if (h.position !== null && BigInt(h.position) >= target) return;
        await stalled(h.position ?? 'none');
        await sleep(2);
      }
    };
  } else {
    const base = startChild(
      root,
      [
        ...(process.env['BENCH_BASELINE_NODE_ARGS']?.split(' ').filter((a) => a !== '') ?? []),
        '--import',
        'tsx',
        'bench/engine/minimalPipeline.ts',
        scratch.amqpUrl,
        `${path}.baseline`,
        String(total),
      ],
      'stdout',
    );
    child = base;
    const finished = waitForLine(base.lines, /^done (\d+)/);
    done = async () => {
      await finished;
    };
  }
  const pid = child.proc.pid!;
  const started = stallGuard(`the ${kind} to start taking from mesh.reports`);
  while ((await depth()) === total) await started(total);
  const t0 = performance.now();
  const cpu0 = cpuMicros(pid);
  const main0 = cpuMicros(pid, true);
  const broker0 = brokerPid === null ? 0 : cpuMicros(brokerPid);
  const drained = stallGuard('mesh.reports to empty');
  for (let left = await depth(); left > 0; left = await depth()) await drained(left);
  await done();
  const t1 = performance.now();
  const cpu1 = cpuMicros(pid);
  const main1 = cpuMicros(pid, true);
  const broker1 = brokerPid === null ? 0 : cpuMicros(brokerPid);
  await child.stop();
  await conn.close();
  return {
    seconds: (t1 - t0) / 1000,
    cpuPerReport: (cpu1 - cpu0) / total,
    mainCpuPerReport: (main1 - main0) / total,
    brokerCpuPerReport: brokerPid === null ? null : (broker1 - broker0) / total,
  };
}

/**
 * A wait that fails instead of hanging: call it with the figure being waited on at each poll
 * (it sleeps 2 ms); it throws once that figure has not moved for BENCH_STALL_SECONDS (default
 * 60), saying what was awaited and where mesh.dead stands (refused reports never arrive).
 */
function stallGuard(what: string): (figure: unknown) => Promise<void> {
  const limitMs = Number(process.env['BENCH_STALL_SECONDS'] ?? 60) * 1000;
  let last: unknown = Symbol('none');
  let since = performance.now();
  return async (figure) => {
    if (figure !== last) {
      last = figure;
      since = performance.now();
    } else if (performance.now() - since > limitMs) {
      const dead = await deadLetterCount().catch((err: unknown) => `unknown (${(err as Error).message})`);
      throw new Error(`bench/engine: waited ${limitMs / 1000} s for ${what}, stuck at ${String(figure)}; mesh.dead holds ${dead}`);
    }
    await sleep(2);
  };
}

async function deadLetterCount(): Promise<number> {
  const conn = await amqp.connect(scratch.amqpUrl);
  try {
    return (await (await conn.createChannel()).checkQueue('mesh.dead')).messageCount;
  } finally {
    await conn.close();
  }
}

async function drainScenario(scenario: Scenario): Promise<void> {
  const engine: Drain[] = [];
  const baseline: Drain[] = [];
  const group: Drain[] = [];
  // Alternating, each side first in turn: the broker and the disk are shared with whatever else
  // runs on the machine, and neither side should always get the quieter moment. A third side,
  // serve with `--sqlite-sync group` (the event loop commits; the WAL is fsynced on a libuv
  // thread), says what the writer thread buys alone (BENCH_SYNC_GROUP=0 leaves it out).
  const sides: Side[] = process.env['BENCH_SYNC_GROUP'] === '0' ? ['baseline', 'engine'] : ['baseline', 'engine', 'engine-group'];
  // BENCH_TRACING=1: a fourth side, serve --tracing on exporting to a local sink, read against serve with it off.
  if (tracingToo) sides.push('engine-traced');
  if (beforeRoot !== undefined) sides.push('engine-before');
  if (withoutTreeToo) sides.push('engine-untreed');
  const traced: Drain[] = [];
  const before: Drain[] = [];
  const untreed: Drain[] = [];
  for (let pass = 0; pass < passes; pass++) {
    const order = pass % 2 === 0 ? sides : [...sides].reverse();
    for (const side of order) {
      const d = await drain(side, scenario, pass);
      const into = { engine, baseline, 'engine-traced': traced, 'engine-before': before, 'engine-group': group, 'engine-untreed': untreed };
      into[side].push(d);
    }
  }
  const rateOf = (d: Drain): number => total / d.seconds;
  const ratios = engine.map((e, i) => rateOf(e) / rateOf(baseline[i]!));
  report.row({
    name: `drain of ${fmt(total)} prefilled reports, ${scenario.name}`,
    unit: 'reports/s',
    converge: engine.map(rateOf),
    baseline: baseline.map(rateOf),
    goal: { ratioAtLeast: 0.8 },
    notes: `ratio per pass ${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)}; moonshot 0.95`,
    // The fleet-sized drain is the one figure to read first (BENCHMARKS.md's headline).
    headline: scenario.nodes.length >= 10_000,
  });
  if (group.length > 0) {
    const groupRatios = group.map((e, i) => rateOf(e) / rateOf(baseline[i]!));
    report.row({
      name: `drain, ${scenario.name}, serve --sqlite-sync group`,
      unit: 'reports/s',
      converge: group.map(rateOf),
      baseline: baseline.map(rateOf),
      notes: `the event loop commits, the WAL fsynced off it (the default writes on a thread of its own); ratio per pass ${Math.min(...groupRatios).toFixed(2)}–${Math.max(...groupRatios).toFixed(2)}`,
    });
  }
  if (traced.length > 0) {
    const tracedRatios = traced.map((e, i) => rateOf(e) / rateOf(engine[i]!));
    report.row({
      name: `drain, ${scenario.name}, serve --tracing on against off`,
      unit: 'reports/s',
      converge: traced.map(rateOf),
      baseline: engine.map(rateOf),
      notes: `baseline here is serve with tracing off (the no-op path); spans exported over OTLP/HTTP JSON to a sink in the bench's process, ${sinkSpans()} spans received; ratio per pass ${Math.min(...tracedRatios).toFixed(2)}–${Math.max(...tracedRatios).toFixed(2)}`,
    });
  }
  if (untreed.length > 0) {
    const treeRatios = engine.map((e, i) => rateOf(e) / rateOf(untreed[i]!));
    report.row({
      name: `drain, ${scenario.name}, serve with the audit tree against without (bench only)`,
      unit: 'reports/s',
      converge: engine.map(rateOf),
      baseline: untreed.map(rateOf),
      goal: { ratioAtLeast: 0.95 },
      notes: `baseline here is the same serve with its store appending no leaf hashes and no head (BENCH_WITHOUT_AUDIT_TREE: a preloaded module sets withoutAuditTreeKey); ratio per pass ${Math.min(...treeRatios).toFixed(2)}–${Math.max(...treeRatios).toFixed(2)}`,
    });
    report.row({
      name: `CPU per report, ${scenario.name}, serve with the audit tree against without (bench only)`,
      unit: 'µs',
      better: 'lower',
      converge: engine.map((d) => d.cpuPerReport),
      baseline: untreed.map((d) => d.cpuPerReport),
      notes: "the process's utime + stime over the drain, all its threads (the tree is built on the writer thread)",
    });
  }
  if (before.length > 0) {
    const beforeRatios = engine.map((e, i) => rateOf(e) / rateOf(before[i]!));
    report.row({
      name: `drain, ${scenario.name}, serve against serve at ${beforeCommit}`,
      unit: 'reports/s',
      converge: engine.map(rateOf),
      baseline: before.map(rateOf),
      notes: `baseline here is serve built from ${beforeCommit} (BENCH_BEFORE_ROOT), on a store this bench wrote; ratio per pass ${Math.min(...beforeRatios).toFixed(2)}–${Math.max(...beforeRatios).toFixed(2)}`,
    });
    report.row({
      name: `CPU per report, ${scenario.name}, serve against serve at ${beforeCommit}`,
      unit: 'µs',
      better: 'lower',
      converge: engine.map((d) => d.cpuPerReport),
      baseline: before.map((d) => d.cpuPerReport),
      notes: "the process's utime + stime over the drain: steadier than the rate on a shared machine",
    });
  }
  report.row({
    name: `CPU per report, ${scenario.name}`,
    unit: 'µs',
    better: 'lower',
    converge: engine.map((d) => d.cpuPerReport),
    baseline: baseline.map((d) => d.cpuPerReport),
    notes: "the process's utime + stime over the drain",
  });
  report.row({
    name: `CPU per report on the main thread, ${scenario.name}`,
    unit: 'µs',
    better: 'lower',
    converge: engine.map((d) => d.mainCpuPerReport),
    baseline: baseline.map((d) => d.mainCpuPerReport),
    notes: 'the event loop alone; the rest is the SQLite writer thread, the collector and libuv',
  });
  if (brokerPid !== null)
    report.row({
      name: `broker CPU per report, ${scenario.name}`,
      unit: 'µs',
      better: 'lower',
      converge: engine.map((d) => d.brokerCpuPerReport!),
      baseline: baseline.map((d) => d.brokerCpuPerReport!),
      notes: 'the local RabbitMQ delivering to each side: the 2 cores are shared by the engine and its broker',
    });
}

type Side = 'engine' | 'engine-group' | 'engine-traced' | 'engine-before' | 'engine-untreed' | 'baseline';
const beforeRoot = process.env['BENCH_BEFORE_ROOT'];
/** The commit the other checkout is at, named in the row. */
const beforeCommit =
  beforeRoot === undefined ? '' : execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: beforeRoot, encoding: 'utf8' }).trim();
const tracingToo = process.env['BENCH_TRACING'] === '1';
/** Bench only: a side whose serve appends without the audit tree, set by a module preloaded into it alone. */
const withoutTreeToo = process.env['BENCH_WITHOUT_AUDIT_TREE'] === '1';
const withoutTreePreload = `data:text/javascript,${encodeURIComponent(`globalThis[Symbol.for(${JSON.stringify(withoutAuditTreeKey.description)})] = true;`)}`;
/** The OTLP/HTTP sink a traced serve exports to: it counts the spans (roughly, by name fields) and drops them. */
let sinkCount = 0;
const sinkSpans = (): string => fmt(sinkCount);
const sink = createServer((req, res) => {
  req.on('data', (c: Buffer) => {
    for (let i = c.indexOf('"spanId"'); i !== -1; i = c.indexOf('"spanId"', i + 1)) sinkCount++;
  });
  req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
});
if (tracingToo) {
  await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', () => resolve()));
  const a = sink.address();
  if (a !== null && typeof a !== 'string') process.env['OTEL_EXPORTER_OTLP_ENDPOINT'] = `http://127.0.0.1:${a.port}`;
}

try {
  writeFileSync(keyPath, signingKeyToPem(key), { mode: 0o600 });
  const u = await admin.request('PUT', `/users/${seg(publisherUser)}`, { password: publisherPass, tags: 'impersonator' });
  if (u.status !== 201 && u.status !== 204) throw new Error(`cannot create the publisher user: HTTP ${u.status}`);
  await admin.request('PUT', `/permissions/${seg(scratch.vhost)}/${seg(publisherUser)}`, { configure: '', write: '.*', read: '' });
  await (await connectAmqp({ url: scratch.amqpUrl, logger, topology: meshTopology() })).close();

  const only = process.env['BENCH_ONLY'];
  if (only === undefined || only.includes('one')) await drainScenario({ name: 'one node', nodes: ['solo'] });
  if (only === undefined || only.includes('10k'))
    await drainScenario({ name: '10,000 nodes', nodes: Array.from({ length: 10_000 }, (_, i) => `n${i}`) });
  if (only === undefined || only.includes('latency'))
    await measureLatency({
      dir,
      prefillStore: (p, n) => prefillStore(p, n, key),
      startServe,
      publisherUrl,
      reportBody,
      report,
      rate,
      seconds,
      probes,
    });
  if (leftovers.length > 0)
    report.note(
      `Reports back in mesh.reports when a pass began, purged first (delivered to the pass before and not acked when it stopped): ${leftovers.join('; ')}.`,
    );
  report.note(
    'serve runs with `--node-report-burst` raised to hold every report a node sends in the run (one node: all of them); the per-node budget still checks each report, with nothing to refuse.',
  );
  report.end();
} finally {
  for (const c of children) c.kill('SIGKILL');
  sink.close();
  await admin.request('DELETE', `/users/${seg(publisherUser)}`).catch(() => undefined);
  await scratch.remove();
  rmSync(dir, { recursive: true, force: true });
}
