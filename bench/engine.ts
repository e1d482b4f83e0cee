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
import { execFileSync, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request } from 'node:http';
import type { IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import amqp from 'amqplib';
import pino from 'pino';
import { createManagementClient, seg } from '../src/brokerAdmin/managementClient.ts';
import { generateSigningKey, signingKeyToPem } from '../src/core/declaration/index.ts';
import { makeDeclarationSent, streamOf } from '../src/core/events/index.ts';
import { createSqliteEventStore, withoutAuditTreeKey } from '../src/store/sqlite/sqliteEventStore.ts';
import type { StreamWrite } from '../src/store/index.ts';
import { connectAmqp } from '../src/transport/amqpConnection.ts';
import { meshTopology } from '../src/transport/topology.ts';
import { encodeReport } from '../src/core/wire/index.ts';
import { createScratchVhost, defaultBroker } from '../test/support/broker.ts';
import { createBenchReport } from './support/report.ts';

const root = new URL('..', import.meta.url).pathname;
const total = Number(process.env['BENCH_REPORTS'] ?? 50_000);
const passes = Number(process.env['BENCH_PASSES'] ?? 3);
const rate = Number(process.env['BENCH_RATE'] ?? 1_000);
const seconds = Number(process.env['BENCH_SECONDS'] ?? 10);
const probes = Number(process.env['BENCH_AWAIT_PROBES'] ?? 40);
const clockTick = 100; // CLK_TCK on Linux: /proc/<pid>/stat counts CPU in 1/100 s
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
const children = new Set<ChildProcess>();

const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');
const report = createBenchReport(
  'Engine: converge serve against the minimal pipeline',
  `\`converge serve\` (the built dist CLI, a child process) over RabbitMQ and SQLite draining ${fmt(total)} prefilled reports, ` +
    'against the minimal pipeline (quorum queue → JSON.parse → better-sqlite3 batch of 500, WAL, FULL → ack; ' +
    'bench/engine/minimalPipeline.ts) on the same broker and disk, alternating passes; both timed from outside, from the ' +
    "queue's first drop to every report folded (serve's /healthz position) or committed (the baseline). Then report → " +
    `visible and \`await\` latency on a serve under a steady load of ${fmt(rate)} reports/s (no baseline: the goal is absolute).`,
);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** utime + stime of a process in µs (all its threads: GC, libuv pool, SQLite's writer), or of its main thread alone. */
function cpuMicros(pid: number, mainThread = false): number {
  const stat = readFileSync(mainThread ? `/proc/${pid}/task/${pid}/stat` : `/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) / clockTick) * 1e6;
}

type Scenario = Readonly<{ name: string; nodes: readonly string[] }>;
type Prefilled = Readonly<{ head: bigint; digests: ReadonlyMap<string, string> }>;

const key = generateSigningKey();
const keyPath = join(dir, 'key.pem');

/**
 * A store that already holds one declaration per node (so reports match and the fold does its
 * full work), written through the engine's own event constructor and store, with the relay's
 * checkpoint at the head: those declarations count as delivered, and no inbox is declared.
 */
async function prefillStore(path: string, nodes: readonly string[]): Promise<Prefilled> {
  const store = createSqliteEventStore(path);
  const digests = new Map<string, string>();
  const now = new Date();
  for (let i = 0; i < nodes.length; i += 1_000) {
    const writes: StreamWrite[] = nodes.slice(i, i + 1_000).map((node) => {
      const e = makeDeclarationSent({ node, serial: 1, resources: [{ id: 'web' }, { id: 'db' }], key, now });
      digests.set(node, e.data.digest);
      return { stream: streamOf(node), expected: 'no_stream', events: [e] };
    });
    await store.append(writes);
  }
  const head = (await store.headPosition()) ?? 0n;
  await store.setCheckpoint('relay', head);
  await store.close();
  return { head, digests };
}

const reportBody = (node: string, declared: string): Buffer =>
  encodeReport({ node, applied: ['web', 'db'], failed: {}, refused: '', carried: [8080], declared });

const publisherUrl = (): string =>
  `amqp://${seg(publisherUser)}:${publisherPass}@${new URL(defaultBroker.amqpUrl).host}/${seg(scratch.vhost)}`;

/** `count` reports into mesh.reports, round robin over the nodes, confirmed by the broker. */
async function fillQueue(nodes: readonly string[], digests: ReadonlyMap<string, string>, count: number, tag: string): Promise<void> {
  const lanes = 4;
  await Promise.all(
    Array.from({ length: lanes }, async (_, lane) => {
      const conn = await amqp.connect(publisherUrl());
      const ch = await conn.createConfirmChannel();
      for (let i = lane; i < count; i += lanes) {
        const node = nodes[i % nodes.length]!;
        const ok = ch.publish('mesh', 'report', reportBody(node, digests.get(node)!), {
          persistent: true,
          userId: node,
          messageId: `${tag}-${i}`,
          contentType: 'application/json',
        });
        if (!ok) await new Promise((r) => ch.once('drain', r));
        if (i % 4_000 < lanes) await ch.waitForConfirms();
      }
      await ch.waitForConfirms();
      await conn.close();
    }),
  );
}

function httpGet(url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

type Child = Readonly<{ proc: ChildProcess; lines: AsyncIterator<string>; stop: () => Promise<void> }>;

function startChild(args: readonly string[], stdoutOrErr: 'stdout' | 'stderr'): Child {
  const proc = spawn(process.execPath, args, { cwd: root, stdio: ['pipe', 'pipe', 'pipe'] });
  children.add(proc);
  const out = stdoutOrErr === 'stdout' ? proc.stdout! : proc.stderr!;
  const other = stdoutOrErr === 'stdout' ? proc.stderr! : proc.stdout!;
  let tail = '';
  // e.g. BENCH_SERVE_NODE_ARGS=--trace-gc BENCH_CHILD_OUTPUT=/tmp/gc.txt: what the child prints besides its lines.
  const output = process.env['BENCH_CHILD_OUTPUT'];
  other.on('data', (c: Buffer) => {
    tail = (tail + c.toString()).slice(-4000);
    if (output !== undefined) appendFileSync(output, c);
  });
  const lines = createInterface({ input: out })[Symbol.asyncIterator]();
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  proc.once('exit', (code, signal) => {
    children.delete(proc);
    if (code !== 0 && signal === null) console.error(`child ${args.join(' ')} exited ${code}: ${tail}`);
  });
  return {
    proc,
    lines,
    stop: async () => {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      // serve stops on SIGTERM; the baseline when its stdin closes (after its last acks are flushed).
      if (stdoutOrErr === 'stderr') proc.kill('SIGTERM');
      proc.stdin?.end();
      await exited;
    },
  };
}

async function waitForLine(lines: AsyncIterator<string>, match: RegExp): Promise<RegExpMatchArray> {
  for (;;) {
    const r = await lines.next();
    if (r.done === true) throw new Error(`child ended before printing ${match}`);
    const m = r.value.match(match);
    if (m !== null) return m;
  }
}

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

/** The local broker's process (RabbitMQ's Erlang VM), or null when the broker runs elsewhere: its CPU is the machine's too. */
const brokerPid = ((): number | null => {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === 'beam.smp') return Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  return null;
})();

type Drain = Readonly<{ seconds: number; cpuPerReport: number; mainCpuPerReport: number; brokerCpuPerReport: number | null }>;

/** Reports found back in mesh.reports at the start of a pass (taken but never acked by the one before). */
const leftovers: string[] = [];
let previous: string | null = null;

/** Start the consumer on a full queue; time from the first message taken to the last one visible. */
async function drain(kind: Side, scenario: Scenario, pass: number): Promise<Drain> {
  const path = join(dir, `${kind}-${scenario.name}-${pass}.db`);
  const { head, digests } = await prefillStore(path, scenario.nodes);
  const conn = await amqp.connect(scratch.amqpUrl);
  const ch = await conn.createChannel();
  // What the previous pass's consumer had taken but not acked when it stopped comes back to the
  // queue once its connection closes: the next pass must start from exactly `total`.
  const { messageCount: left } = await ch.purgeQueue('mesh.reports');
  if (left > 0) leftovers.push(`${left} after ${previous ?? 'an earlier run'}`);
  previous = `${kind} pass ${pass + 1} (${scenario.name})`;
  await fillQueue(scenario.nodes, digests, total, `${kind}-${scenario.name}-${pass}`);
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

const pct = (sorted: readonly number[], p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;

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

/** report → visible and await wake-up on a serve under a steady load of `rate` reports/s. */
async function latency(): Promise<void> {
  const loadNodes = Array.from({ length: 1_000 }, (_, i) => `load-${i}`);
  const probeNodes = Array.from({ length: probes }, (_, i) => `probe-${i}`);
  const others = Array.from({ length: 9_000 - probes }, (_, i) => `idle-${i}`);
  const path = join(dir, 'latency.db');
  const { digests } = await prefillStore(path, [...loadNodes, ...probeNodes, ...others]);
  const serve = startServe(path, Math.ceil((rate * seconds) / loadNodes.length) + 1);
  const url = await serve.url;
  while ((await httpGet(`${url}/readyz`)).status !== 200) await sleep(20);

  // Every node state change, as the dashboard would hear it.
  const visible = new Map<string, number>();
  const sse = await new Promise<IncomingMessage>((resolve, reject) => {
    const req = request(`${url}/v1/events`, { agent: false }, resolve);
    req.on('error', reject);
    req.end();
  });
  let buf = '';
  sse.setEncoding('utf8');
  sse.on('data', (chunk: string) => {
    const at = performance.now();
    buf += chunk;
    let end: number;
    while ((end = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      const data = block.split('\n').find((l) => l.startsWith('data: '));
      if (data === undefined) continue;
      const v = JSON.parse(data.slice(6)) as { node: string; reports: number };
      visible.set(`${v.node}#${v.reports}`, at);
    }
  });

  const conn = await amqp.connect(publisherUrl());
  const ch = await conn.createConfirmChannel();
  const published = new Map<string, number>();
  const sent = new Map<string, number>();
  const publish = (node: string): void => {
    const k = (sent.get(node) ?? 0) + 1;
    sent.set(node, k);
    published.set(`${node}#${k}`, performance.now());
    ch.publish('mesh', 'report', reportBody(node, digests.get(node)!), {
      persistent: true,
      userId: node,
      messageId: `lat-${node}-${k}`,
      contentType: 'application/json',
    });
  };

  // The steady load: rate/100 reports every 10 ms, round robin over the load nodes.
  let next = 0;
  let running = true;
  const load = (async () => {
    const start = performance.now();
    let tick = 0;
    while (running) {
      const due = Math.floor(((performance.now() - start) / 1000) * rate);
      while (next < due) publish(loadNodes[next++ % loadNodes.length]!);
      tick++;
      await sleep(Math.max(0, start + tick * 10 - performance.now()));
    }
  })();

  // Await probes, one at a time during the load: a GET …/await for a node behind its
  // declaration, then its matching report; the wake-up is publish → the await's answer.
  const awaits: number[] = [];
  const probeStart = performance.now();
  for (const node of probeNodes) {
    const answered = httpGet(`${url}/v1/nodes/${node}/await?timeoutMs=10000`).then((r) => ({ r, at: performance.now() }));
    await sleep(50); // the request is registered by then (loopback, a few ms)
    publish(node);
    const t = published.get(`${node}#1`)!;
    const { r, at } = await answered;
    if (r.status === 200) awaits.push(at - t);
    await sleep(Math.max(0, (seconds * 1000) / probeNodes.length - (performance.now() - probeStart) / (awaits.length + 1)));
  }
  while (performance.now() - probeStart < seconds * 1000) await sleep(50);
  running = false;
  await load;
  await ch.waitForConfirms();
  await sleep(1_000);
  sse.destroy();
  await conn.close();
  await serve.stop();

  const lat: number[] = [];
  let missing = 0;
  for (const [k, t] of published) {
    if (k.startsWith('probe-')) continue;
    const v = visible.get(k);
    if (v === undefined) missing++;
    else lat.push(v - t);
  }
  lat.sort((a, b) => a - b);
  awaits.sort((a, b) => a - b);
  const under = `under ${fmt(rate)} reports/s`;
  report.row({
    name: `report → visible (publish → its state on GET /v1/events) p50, ${under}`,
    unit: 'ms',
    better: 'lower',
    converge: pct(lat, 50),
    notes: `${fmt(lat.length)} reports${missing > 0 ? `, ${missing} never seen` : ''}`,
  });
  report.row({
    name: `report → visible p99, ${under}`,
    unit: 'ms',
    better: 'lower',
    converge: pct(lat, 99),
    notes: `max ${pct(lat, 100).toFixed(1)} ms`,
  });
  report.row({
    name: `await wake-up (matching report published → GET …/await answers) p50, ${under}`,
    unit: 'ms',
    better: 'lower',
    converge: pct(awaits, 50),
    notes: `${awaits.length} of ${probeNodes.length} probes`,
  });
  report.row({ name: `await wake-up p99, ${under}`, unit: 'ms', better: 'lower', converge: pct(awaits, 99) });
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
  if (only === undefined || only.includes('latency')) await latency();
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
