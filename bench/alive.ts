// Alive messages through a real RabbitMQ (a scratch vhost of its own, deleted after): what the
// engine's ingest absorbs and the CPU it spends per alive (process.cpuUsage, every thread of this
// process) with liveness recorded as transitions (docs/design.md §3), beside a minimal amqplib
// consume-and-ack loop on the same broker in the same run, alternating passes. Two loads:
//   - paced: a publisher (a child process, so its CPU is not counted) offers the target rate,
//     20,000 alive/s from 100,000 node names; CPU per alive and the fraction of one core;
//   - drain: mesh.alive pre-filled, then drained as fast as it goes (the capacity).
// The drain also runs the engine with the rule stores were written with before (one AliveSeen per
// node per 15 s, on a clock that moves as the target rate would), to count the events each appends.
// The alives carry user_id = the node, as nodes send them, through a user tagged `impersonator`
// (one broker account for every node name; RabbitMQ validates user_id for it as for a node).
//   npm run bench -- alive     CONVERGE_BENCH_SCALE=0.01 (1,000 names) for a quick look; BENCH_ALIVE_RATE (20,000),
//                              BENCH_ALIVE_NAMES (100,000 × scale), BENCH_ALIVE_ROUNDS (alives per name per pass, 4), BENCH_PASSES (2)
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import amqp from 'amqplib';
import Database from 'better-sqlite3';
import pino from 'pino';
import { createManagementClient, seg } from '../src/brokerAdmin/managementClient.ts';
import { createIngest } from '../src/engine/ingest/index.ts';
import type { IngestOptions } from '../src/engine/ingest/index.ts';
import { createSqliteEventStore } from '../src/store/sqlite/sqliteEventStore.ts';
import { connectAmqp } from '../src/transport/amqpConnection.ts';
import { createAmqpTransport } from '../src/transport/amqpTransport.ts';
import type { Delivery, IngestSource } from '../src/transport/port.ts';
import { meshTopology } from '../src/transport/topology.ts';
import { createScratchVhost, defaultBroker, probeBroker } from '../test/support/broker.ts';
import { createBenchReport } from './support/report.ts';

const scale = Number(process.env['CONVERGE_BENCH_SCALE'] ?? 1);
const rate = Number(process.env['BENCH_ALIVE_RATE'] ?? 20_000);
const names = Math.max(1_000, Math.round(Number(process.env['BENCH_ALIVE_NAMES'] ?? 100_000 * scale)));
const rounds = Number(process.env['BENCH_ALIVE_ROUNDS'] ?? 4);
/** At least 20,000 alives a pass, so a pass lasts about a second at the target. */
const total = Math.max(20_000, names * rounds);
const passes = Math.max(1, Number(process.env['BENCH_PASSES'] ?? 2));
/** The transport's default (src/transport/amqpIngestSource.ts), for both sides. */
const prefetch = 2_000;
/** At the target, each name is heard every this many ms. */
const intervalMs = (100_000 / rate) * 1_000;
const logger = pino({ level: process.env['LOG_LEVEL'] ?? 'silent' });
const root = new URL('..', import.meta.url).pathname;
const fmt = (n: number, digits = 0): string => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

const probe = await probeBroker();
if (!probe.ok) {
  console.error(`bench/alive needs RabbitMQ (127.0.0.1:5672 and its management API): ${probe.reason}`);
  process.exit(1);
}

// The publisher, a child process: `total` alives round-robin over the names, at `rate`/s (0: as
// fast as the broker confirms), each with user_id = its node.
const publisherJs = `
import amqp from 'amqplib';
const [url, total, rate, names, prefix] = process.argv.slice(1);
const conn = await amqp.connect(url);
const ch = await conn.createConfirmChannel();
const bodies = Array.from({ length: +names }, (_, i) => Buffer.from(JSON.stringify({ node: prefix + i })));
const t0 = performance.now();
let sent = 0;
let confirmed = 0;
while (sent < +total) {
  const due = +rate > 0 ? Math.min(+total, Math.floor(((performance.now() - t0) / 1000) * +rate)) : Math.min(+total, sent + 1000);
  if (due <= sent) { await new Promise((r) => setTimeout(r, 1)); continue; }
  for (; sent < due; sent++) {
    const i = sent % +names;
    if (!ch.publish('mesh', 'alive', bodies[i], { userId: prefix + i, contentType: 'application/json' })) await new Promise((r) => ch.once('drain', r));
  }
  if (sent - confirmed >= 5000) { await ch.waitForConfirms(); confirmed = sent; }
}
await ch.waitForConfirms();
process.stdout.write(JSON.stringify({ seconds: (performance.now() - t0) / 1000 }));
await conn.close();
`;

const scratch = await createScratchVhost('converge-bench-alive');
const admin = createManagementClient({ managementUrl: scratch.managementUrl });
const user = `converge-bench-alive-${randomBytes(4).toString('hex')}`;
const password = randomBytes(12).toString('hex');
const prefix = `bench-alive-${process.pid}-n`;
const dir = mkdtempSync(join(tmpdir(), 'converge-bench-alive-'));

/** Publish `total` alives (rate 0: unpaced); resolves with the publisher's seconds. */
function publish(publishRate: number): Promise<number> {
  const url = `amqp://${seg(user)}:${seg(password)}@${new URL(defaultBroker.amqpUrl).host}/${seg(scratch.vhost)}`;
  const child = spawn(
    process.execPath,
    ['--input-type=module', '-e', publisherJs, url, String(total), String(publishRate), String(names), prefix],
    {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  return new Promise((resolve, reject) =>
    child.once('exit', (code) =>
      code === 0 ? resolve((JSON.parse(out) as { seconds: number }).seconds) : reject(new Error(`publisher: ${err}`)),
    ),
  );
}

type Pass = { perSecond: number; cpuUsPerAlive: number; core: number; events?: Map<string, number> };

/** From the first delivery to the last ack: wall time and the CPU of this process. */
function window() {
  let t = 0;
  let cpu: NodeJS.CpuUsage | null = null;
  return {
    first(): void {
      if (cpu !== null) return;
      t = performance.now();
      cpu = process.cpuUsage();
    },
    end(): Pass {
      const s = (performance.now() - t) / 1000;
      const c = process.cpuUsage(cpu!);
      const cpuS = (c.user + c.system) / 1e6;
      return { perSecond: total / s, cpuUsPerAlive: (cpuS * 1e6) / total, core: cpuS / s };
    },
  };
}

/** The baseline: a minimal amqplib loop, consuming mesh.alive and acking each message. */
async function bare(load: 'paced' | 'drain'): Promise<Pass> {
  if (load === 'drain') await publish(0);
  const conn = await amqp.connect(scratch.amqpUrl);
  const ch = await conn.createChannel();
  await ch.prefetch(prefetch, false);
  const w = window();
  let n = 0;
  const done = new Promise<void>((resolve) => {
    void ch.consume('mesh.alive', (m) => {
      if (m === null) return;
      w.first();
      ch.ack(m);
      if (++n === total) resolve();
    });
  });
  const published = load === 'paced' ? publish(rate) : Promise.resolve(0);
  await done;
  const pass = w.end();
  await published;
  await conn.close();
  return pass;
}

/** The engine's ingest (SQLite store): `transitions`, as serve runs it, or the rule before it. */
async function engine(load: 'paced' | 'drain', rule: 'transitions' | 'AliveSeen', pass: number): Promise<Pass> {
  if (load === 'drain') await publish(0);
  const path = join(dir, `${load}-${rule}-${pass}.db`);
  const store = createSqliteEventStore(path);
  const transport = await createAmqpTransport({ url: scratch.amqpUrl, logger, prefetch });
  const w = window();
  let received = 0;
  const inner = transport.ingestSource();
  const source: IngestSource = Object.create(inner) as IngestSource;
  source.start = (onDelivery: (d: Delivery) => void) =>
    inner.start((d) => {
      w.first();
      received++;
      onDelivery(d);
    });
  // The old rule's 15 s are judged on a clock moving as the target rate would move it.
  const t0 = Date.parse('2026-01-01T00:00:00Z');
  const options: IngestOptions =
    rule === 'transitions'
      ? { store, source, logger, liveness: { engine: 'bench', graceMs: 60_000, flushMs: 5_000 } }
      : { store, source, logger, aliveResolutionMs: 15_000, now: () => new Date(t0 + (received * intervalMs) / names) };
  const ingest = createIngest(options);
  await ingest.start();
  const published = load === 'paced' ? publish(rate) : Promise.resolve(0);
  while (ingest.stats().acked < total) await new Promise((r) => setTimeout(r, 5));
  const result = w.end();
  await published;
  await ingest.stop();
  await transport.close();
  await store.close();
  const db = new Database(path, { readonly: true });
  const rows = db.prepare('SELECT type, count(*) AS n FROM events GROUP BY type').all() as { type: string; n: number }[];
  db.close();
  return { ...result, events: new Map(rows.map((r) => [r.type, r.n])) };
}

try {
  await (await connectAmqp({ url: scratch.amqpUrl, logger, topology: meshTopology() })).close();
  const put = async (path: string, body: object): Promise<void> => {
    const res = await admin.request('PUT', path, body);
    if (res.status !== 201 && res.status !== 204) throw new Error(`PUT ${path}: HTTP ${res.status}`);
  };
  await put(`/users/${seg(user)}`, { password, tags: 'impersonator' });
  await put(`/permissions/${seg(scratch.vhost)}/${seg(user)}`, { configure: '', write: '.*', read: '' });

  const paced = { bare: [] as Pass[], engine: [] as Pass[] };
  const drain = { bare: [] as Pass[], engine: [] as Pass[], old: [] as Pass[] };
  for (let pass = 0; pass < passes; pass++) {
    paced.bare.push(await bare('paced'));
    paced.engine.push(await engine('paced', 'transitions', pass));
    drain.bare.push(await bare('drain'));
    drain.engine.push(await engine('drain', 'transitions', pass));
    drain.old.push(await engine('drain', 'AliveSeen', pass));
  }

  const report = createBenchReport(
    'Alive: ingest through RabbitMQ, liveness as transitions',
    `${fmt(total)} alives a pass from ${fmt(names)} node names (user_id = node), through mesh.alive in a scratch vhost, ` +
      `absorbed by the engine's ingest into SQLite, liveness recorded as transitions, against a minimal amqplib ` +
      `consume-and-ack loop on the same broker (prefetch ${fmt(prefetch)} both); paced at ${fmt(rate)}/s by a publisher in ` +
      'a child process, and drained from a pre-filled queue. CPU is process.cpuUsage of this process (every thread), from ' +
      'the first delivery to the last ack.',
  );
  const at = (p: Pass): number => (p.cpuUsPerAlive * rate) / 1e6;
  report.row({
    name: `CPU at ${fmt(rate)} alive/s (paced), fraction of one core, against the bare loop`,
    unit: 'cores',
    better: 'lower',
    converge: paced.engine.map(at),
    baseline: paced.bare.map(at),
    goal: { atMost: 0.5 },
    notes:
      `CPU per alive × ${fmt(rate)}/s; offered and absorbed ${fmt(Math.max(...paced.engine.map((p) => p.perSecond)))}/s ` +
      `(the publisher's best; measured fraction at that rate ${fmt(Math.min(...paced.engine.map((p) => p.core)), 2)}); ` +
      'goal: half a core left for the rest of serve',
  });
  report.row({
    name: 'CPU per alive (paced), against the bare loop',
    unit: 'µs',
    better: 'lower',
    converge: paced.engine.map((p) => p.cpuUsPerAlive),
    baseline: paced.bare.map((p) => p.cpuUsPerAlive),
  });
  report.row({
    name: 'alive absorbed, draining a pre-filled mesh.alive, against the bare loop',
    unit: 'alive/s',
    converge: drain.engine.map((p) => p.perSecond),
    baseline: drain.bare.map((p) => p.perSecond),
    goal: { atLeast: rate },
    notes:
      `CPU per alive ${fmt(Math.min(...drain.engine.map((p) => p.cpuUsPerAlive)), 1)} µs (bare ${fmt(Math.min(...drain.bare.map((p) => p.cpuUsPerAlive)), 1)} µs); ` +
      'the bare loop acks each message, ingest a batch at once (one multiple ack)',
  });
  const nodeEvents = (p: Pass): number =>
    [...(p.events ?? [])]
      .filter(([type]) => type === 'NodeHeard' || type === 'NodeSilent' || type === 'AliveSeen')
      .reduce((s, [, n]) => s + n, 0);
  const simulatedS = (total * intervalMs) / names / 1000;
  report.row({
    name: 'store events appended per node, transitions against AliveSeen every 15 s',
    unit: 'events',
    better: 'lower',
    converge: nodeEvents(drain.engine[0]!) / names,
    baseline: nodeEvents(drain.old[0]!) / names,
    goal: { atMost: 1.05 },
    notes: `each name heard ${fmt(total / names)} times, ${fmt(intervalMs / 1000, 1)} s apart at the target (${fmt(simulatedS)} s of a node's life); goal ≈ one per node`,
  });
  report.row({
    name: 'store events appended per 100,000 alives, transitions against AliveSeen every 15 s',
    unit: 'events',
    better: 'lower',
    converge: (nodeEvents(drain.engine[0]!) / total) * 1e5,
    baseline: (nodeEvents(drain.old[0]!) / total) * 1e5,
    notes: `with transitions, a NodeHeard per node once, then nothing: the figure falls as the run grows; the old rule stays at one per 15 s per node`,
  });
  report.note(
    `The old rule's drain (${fmt(Math.max(...drain.old.map((p) => p.perSecond)))} alive/s, ${fmt(Math.min(...drain.old.map((p) => p.cpuUsPerAlive)), 1)} µs CPU per alive) ` +
      'ran on a clock moving as the target rate would, so its AliveSeen count is what 20,000/s would append.',
  );
  report.end();
} finally {
  await admin.request('DELETE', `/users/${seg(user)}`).catch(() => undefined);
  await scratch.remove();
  rmSync(dir, { recursive: true, force: true });
}
