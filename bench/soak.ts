// A soak: `converge serve` (the built CLI, SQLite, a vhost of its own) under a steady simulated
// fleet for a long while, sampled every minute: RSS, heap, open files, the event loop's p99 delay
// and the store's size. Each series gets its least-squares slope, fitted after a warm-up; the goals
// are flat memory and files (the growth over the window within the samples' own noise) and a p99
// loop delay under 50 ms in every minute. There is no baseline: the engine at minute n is compared
// with itself at minute 1.
// The fleet: BENCH_SOAK_NODES simulated nodes (default 2,000; src/simulation) on a few shared AMQP
// connections, each alive every 5 s and reporting once a minute; a rollout to all of them every
// 10 minutes; an API reader (nodes and fleet pages every 2 s) and an event-stream (SSE) reader.
//   BENCH_SOAK_MINUTES=5 BENCH_SOAK_NODES=500 npm run bench -- soak   (npm run build first)
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { createManagementClient, seg } from '../src/brokerAdmin/managementClient.ts';
import { generateSigningKey, signingKeyToPem } from '../src/core/declaration/index.ts';
import { createSimulatedNode } from '../src/simulation/simulatedNode.ts';
import type { SimulatedNode } from '../src/simulation/simulatedNode.ts';
import { connectAmqp } from '../src/transport/amqpConnection.ts';
import type { AmqpConnection } from '../src/transport/amqpConnection.ts';
import { createAmqpNodeLink } from '../src/transport/amqpNodeLink.ts';
import { mallocArenasMiB } from './support/mallocArenas.ts';
import { createBenchReport } from './support/report.ts';
import { fitLine, flatWithinNoise } from './support/slope.ts';

const scale = Number(process.env['CONVERGE_BENCH_SCALE'] ?? 1);
const minutes = Number(process.env['BENCH_SOAK_MINUTES'] ?? 30);
const nodeCount = Math.max(10, Math.round(Number(process.env['BENCH_SOAK_NODES'] ?? 2_000) * scale));
const sampleEveryMs = 60_000;
const aliveEveryMs = 5_000;
const reportEveryMs = 60_000;
const rolloutEveryMs = 10 * 60_000;
const nodesPerConnection = 250;
const amqpBase = (process.env['CONVERGE_AMQP_URL'] ?? 'amqp://guest:guest@127.0.0.1:5672').replace(/\/+$/, '');
const managementUrl = process.env['CONVERGE_MANAGEMENT_URL'] ?? 'http://guest:guest@127.0.0.1:15672';
const admin = createManagementClient({ managementUrl });
const logger = pino({ level: 'silent' });
const bin = new URL('../bin/converge.js', import.meta.url).pathname;
const turnProbe = new URL('./support/turnProbe.mjs', import.meta.url).href;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

type Sample = {
  minute: number;
  rssMiB: number;
  /** RSS by kind (/proc status: anonymous, file-backed, shared memory such as SQLite's -shm) and V8's external (Buffers). */
  rssAnonMiB: number;
  rssFileMiB: number;
  rssShmemMiB: number;
  /** Of the anonymous RSS, glibc's thread arenas (support/mallocArenas.ts). */
  arenasMiB: number;
  externalMiB: number;
  heapMiB: number;
  openFiles: number;
  loopP99Ms: number;
  storeMiB: number;
};

const cleanups: (() => Promise<void> | void)[] = [];
let cleaning: Promise<void> | null = null;
/** Undo in reverse order, each step bounded: a stuck one must not keep the vhost or the child behind. Once. */
function cleanUp(): Promise<void> {
  cleaning ??= (async () => {
    for (const c of cleanups.splice(0).reverse()) await Promise.race([Promise.resolve(c()).catch(() => undefined), sleep(15_000)]);
  })();
  return cleaning;
}
// Stopping the simulated nodes rejects what they still wait for; only then is that expected.
process.on('unhandledRejection', (err) => {
  if (cleaning !== null) return;
  console.error('bench/soak: unhandled rejection', err);
  void cleanUp().finally(() => process.exit(1));
});
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.on(signal, () => {
    console.error(`bench/soak: ${signal}: cleaning up`);
    void cleanUp().finally(() => process.exit(130));
  });

async function newVhost(): Promise<string> {
  const vhost = `bench-soak-${randomBytes(4).toString('hex')}`;
  if ((await admin.request('PUT', `/vhosts/${seg(vhost)}`, {})).status >= 300) throw new Error(`cannot create vhost ${vhost}`);
  cleanups.push(async () => {
    // The broker may still be closing the vhost's connections: a first call can fail or time out.
    let r = { status: 0 };
    for (let attempt = 0; attempt < 3 && r.status !== 204 && r.status !== 404; attempt++) {
      if (attempt > 0) await new Promise((done) => setTimeout(done, 2_000));
      r = await admin.request('DELETE', `/vhosts/${seg(vhost)}`).catch(() => ({ status: 0 }));
    }
    if (r.status !== 204 && r.status !== 404)
      console.error(`bench/soak: could not delete vhost ${vhost}; delete it by hand (HTTP ${r.status})`);
  });
  await admin.request('PUT', `/permissions/${seg(vhost)}/guest`, { configure: '.*', write: '.*', read: '.*' });
  return vhost;
}

/** `serve` in a child process; resolves with its pid and API URL once it listens. */
async function startServe(env: Record<string, string>): Promise<{ pid: number; url: string; stop: () => Promise<number | null> }> {
  const child = spawn(process.execPath, ['--import', turnProbe, bin, 'serve'], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let text = '';
  child.stderr!.setEncoding('utf8');
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const url = await new Promise<string>((resolve, reject) => {
    child.stderr!.on('data', (chunk: string) => {
      text = (text + chunk).slice(-20_000);
      const m = /converge serving on (http:\/\/\S+)/.exec(text);
      if (m !== null) resolve(m[1]!);
    });
    void exited.then((code) => reject(new Error(`serve exited (${code}) before listening:\n${text}`)));
  });
  // Its warnings and errors through the run go to ours, so a soak that went wrong says so.
  child.stderr!.on('data', (chunk: string) => process.stderr.write(chunk));
  return {
    pid: child.pid!,
    url,
    stop: async () => {
      child.kill('SIGTERM');
      return exited;
    },
  };
}

const metricOf = (text: string, name: string): number => {
  const m = new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.eE+-]+)$`, 'm').exec(text);
  return m === null ? Number.NaN : Number(m[1]);
};

const fileBytes = (path: string): number => {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
};

async function sample(pid: number, url: string, storePath: string, minute: number): Promise<Sample> {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const statusMiB = (field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? Number.NaN) / 1024;
  const metrics = await (await fetch(`${url}/metrics`)).text();
  const mib = (b: number): number => b / 2 ** 20;
  return {
    minute,
    rssMiB: statusMiB('VmRSS'),
    rssAnonMiB: statusMiB('RssAnon'),
    rssFileMiB: statusMiB('RssFile'),
    rssShmemMiB: statusMiB('RssShmem'),
    arenasMiB: mallocArenasMiB(pid),
    externalMiB: mib(metricOf(metrics, 'nodejs_external_memory_bytes')),
    heapMiB: mib(metricOf(metrics, 'nodejs_heap_size_used_bytes')),
    openFiles: readdirSync(`/proc/${pid}/fd`).length,
    // prom-client's p99 of the event loop's delay since the scrape before (its histogram is reset on each).
    loopP99Ms: metricOf(metrics, 'nodejs_eventloop_lag_p99_seconds') * 1000,
    storeMiB: mib(fileBytes(storePath) + fileBytes(`${storePath}-wal`)),
  };
}

type Traffic = {
  reports: number;
  reportErrors: number;
  rollouts: number;
  rolloutErrors: number;
  reads: number;
  readErrors: number;
  sseEvents: number;
};

function readEvents(url: string, headers: Record<string, string>, traffic: Traffic, stop: AbortSignal): Promise<void> {
  return (async () => {
    while (!stop.aborted) {
      // A signal of its own per stream: a stream the server ends (its --stream-max-ms) leaves
      // fetch's abort listener on the signal it was given, one more a reconnect (eleven at
      // minute 53 of an hour's soak, and Node's leak warning).
      const one = new AbortController();
      const abort = (): void => one.abort();
      stop.addEventListener('abort', abort, { once: true });
      try {
        const r = await fetch(`${url}/v1/events`, { headers, signal: one.signal });
        const reader = r.body!.getReader();
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          traffic.sseEvents += (
            Buffer.from(value)
              .toString('utf8')
              .match(/^event:/gm) ?? []
          ).length;
        }
      } catch {
        if (!stop.aborted) await sleep(1_000);
      } finally {
        stop.removeEventListener('abort', abort);
      }
    }
  })();
}

async function main(): Promise<void> {
  const vhost = await newVhost();
  const dir = mkdtempSync(join(tmpdir(), 'converge-soak-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const key = generateSigningKey();
  writeFileSync(join(dir, 'key.pem'), signingKeyToPem(key));
  const token = randomBytes(16).toString('hex');
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const storePath = join(dir, 'soak.db');
  const amqpUrl = `${amqpBase}/${seg(vhost)}`;
  const serve = await startServe({
    CONVERGE_STORE: `sqlite:${storePath}`,
    CONVERGE_AMQP_URL: amqpUrl,
    CONVERGE_MANAGEMENT_URL: managementUrl,
    CONVERGE_PORT: '0',
    CONVERGE_SIGNING_KEY: join(dir, 'key.pem'),
    CONVERGE_API_TOKENS: `${token}:read,send`,
    // The simulated nodes share the bench's connections (one broker account), as the demo's do.
    CONVERGE_TRUST_MISSING_USER_ID: 'on',
    CONVERGE_LOG_LEVEL: 'warn',
    BENCH_TURN_PROBE_FILE: join(dir, 'turns.json'),
  });
  cleanups.push(async () => void (await serve.stop()));
  const { url } = serve;

  const conns: AmqpConnection[] = [];
  for (let i = 0; i < Math.ceil(nodeCount / nodesPerConnection); i++) conns.push(await connectAmqp({ url: amqpUrl, logger }));
  cleanups.push(async () => void (await Promise.all(conns.map((c) => c.close()))));
  const nodes: SimulatedNode[] = [];
  for (let i = 0; i < nodeCount; i++) {
    const link = createAmqpNodeLink(conns[Math.floor(i / nodesPerConnection)]!, { node: `soak-${i}`, logger, userId: null });
    nodes.push(createSimulatedNode({ link, verifyingKey: key, logger, aliveEveryMs, applyDelayMs: 50 }));
  }
  cleanups.push(async () => void (await Promise.all(nodes.map((n) => n.stop().catch(() => undefined)))));

  // Every node is sent its first spec in bulk, so the rollouts find them all.
  for (let i = 0; i < nodeCount; i += 1_000) {
    const batch = nodes.slice(i, i + 1_000).map((n) => ({ node: n.node, resources: [{ id: 'web', image: 'nginx:1' }] }));
    const r = await fetch(`${url}/v1/declarations`, { method: 'POST', headers, body: JSON.stringify(batch) });
    if (r.status !== 202) throw new Error(`bulk send: ${r.status} ${await r.text()}`);
  }
  // After the sends: a node's start waits for its inbox, which the relay declares with the first send.
  for (let i = 0; i < nodes.length; i += 100) await Promise.all(nodes.slice(i, i + 100).map((n) => n.start()));

  const traffic: Traffic = { reports: 0, reportErrors: 0, rollouts: 0, rolloutErrors: 0, reads: 0, readErrors: 0, sseEvents: 0 };
  const stop = new AbortController();
  const timers: NodeJS.Timeout[] = [];
  cleanups.push(() => {
    stop.abort();
    for (const t of timers) clearTimeout(t);
  });
  // A report a minute from each node, spread over the minute.
  for (const n of nodes) {
    const again = (): void => {
      if (stop.signal.aborted) return;
      const declared = n.applied().at(-1) ?? null;
      n.report({ declared, applied: declared === null ? [] : ['web'] }).then(
        () => traffic.reports++,
        () => traffic.reportErrors++,
      );
      timers.push(setTimeout(again, reportEveryMs));
    };
    timers.push(setTimeout(again, Math.random() * reportEveryMs));
  }
  let version = 1;
  const rollout = async (): Promise<void> => {
    if (stop.signal.aborted) return;
    version++;
    const body = {
      resources: [{ id: 'web', image: `nginx:${version}` }],
      selection: { kind: 'prefix', prefix: 'soak-' },
      waves: '1,10%,50%,100%',
      maxFailures: '10%',
      waveTimeoutMs: 5 * 60_000,
      onSuperseded: 'fail',
    };
    const r = await fetch(`${url}/v1/rollouts`, { method: 'POST', headers, body: JSON.stringify(body) }).catch(() => null);
    if (r?.status === 202) traffic.rollouts++;
    else traffic.rolloutErrors++;
    await r?.text();
    timers.push(setTimeout(() => void rollout(), rolloutEveryMs));
  };
  timers.push(setTimeout(() => void rollout(), 30_000));
  const reader = (async () => {
    for (let i = 0; !stop.signal.aborted; i++) {
      const path = i % 2 === 0 ? '/v1/nodes?limit=100' : '/v1/fleet';
      const r = await fetch(`${url}${path}`, { headers, signal: stop.signal }).catch(() => null);
      if (r?.status === 200) traffic.reads++;
      else if (!stop.signal.aborted) traffic.readErrors++;
      await r?.arrayBuffer().catch(() => undefined);
      await sleep(2_000);
    }
  })();
  const sse = readEvents(url, { authorization: headers.authorization }, traffic, stop.signal);

  const samples: Sample[] = [await sample(serve.pid, url, storePath, 0)];
  console.log(`soak: ${nodeCount} nodes, ${minutes} min, sampling every minute (serve pid ${serve.pid})`);
  const t0 = performance.now();
  for (let m = 1; m <= minutes; m++) {
    await sleep(Math.max(0, t0 + m * sampleEveryMs - performance.now()));
    const s = await sample(serve.pid, url, storePath, m);
    samples.push(s);
    console.log(
      `  min ${m}: rss ${s.rssMiB.toFixed(1)} MiB (anon ${s.rssAnonMiB.toFixed(1)} of which malloc arenas ${s.arenasMiB.toFixed(1)}, file ${s.rssFileMiB.toFixed(1)}, shmem ${s.rssShmemMiB.toFixed(1)}), external ${s.externalMiB.toFixed(1)} MiB, heap ${s.heapMiB.toFixed(1)} MiB, files ${s.openFiles}, loop p99 ${s.loopP99Ms.toFixed(1)} ms, store ${s.storeMiB.toFixed(1)} MiB; reports ${traffic.reports}, rollouts ${traffic.rollouts}, reads ${traffic.reads}, sse events ${traffic.sseEvents}`,
    );
  }
  stop.abort();
  await reader;
  await sse;
  const code = await serve.stop();
  summarize(samples, turnsOf(join(dir, 'turns.json')), traffic, code);
}

/** The engine thread's CPU per event-loop turn, each minute since serve started (bench/support/turnProbe.mjs). */
type TurnMinute = Readonly<{ turns: number; p99: number; max: number }>;

function turnsOf(path: string): readonly TurnMinute[] {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as TurnMinute[];
  } catch {
    return [];
  }
}

function summarize(samples: readonly Sample[], turns: readonly TurnMinute[], traffic: Traffic, exitCode: number | null): void {
  // The first minutes fill caches and JIT the code: fitted after a fifth of the run (at most 5 minutes).
  const warmUp = Math.min(5, Math.max(1, Math.floor(minutes / 5)));
  const window = samples.filter((s) => s.minute >= warmUp);
  const report = createBenchReport(
    'Soak',
    `\`converge serve\` (SQLite) under ${nodeCount} simulated nodes (alive every 5 s, a report a minute, a rollout every 10 minutes, an API reader and an event stream) for ${minutes} minutes, sampled each minute. No baseline: each series' least-squares slope from minute ${warmUp} on, against flat.`,
  );
  const series: [keyof Sample, string, string][] = [
    ['rssMiB', 'RSS', 'MiB'],
    ['heapMiB', 'heap used', 'MiB'],
    ['openFiles', 'open files', 'files'],
    ['storeMiB', 'store size (db + WAL)', 'MiB'],
  ];
  for (const [k, name, unit] of series) {
    const xs = window.map((s) => s.minute);
    const ys = window.map((s) => s[k]);
    const fit = fitLine(xs, ys);
    const flat = flatWithinNoise(fit, xs, ys);
    console.log(`${name}: ${samples.map((s) => s[k].toFixed(1)).join(', ')}`);
    report.row({
      name: `${name}, slope`,
      unit: `${unit}/h`,
      converge: fit.slope * 60,
      better: 'lower',
      notes:
        k === 'storeMiB'
          ? 'grows with the record, by design'
          : `${flat.flat ? 'flat' : 'NOT flat'}: ${flat.growth.toFixed(1)} ${unit} over the window against noise ${flat.noise.toFixed(1)} (goal: flat within noise)`,
    });
  }
  // Where RSS went, when it moves: the growth of each kind over the same window.
  const growth = (k: keyof Sample): string => {
    const first = window[0];
    const last = window[window.length - 1];
    return first === undefined || last === undefined ? 'n/a' : `${(last[k] - first[k]).toFixed(1)}`;
  };
  report.note(
    `RSS over the window by kind (MiB): anonymous ${growth('rssAnonMiB')} (glibc's thread arenas ${growth('arenasMiB')}), file-backed ${growth('rssFileMiB')}, shared memory ${growth('rssShmemMiB')}; V8 external (Buffers) ${growth('externalMiB')}, heap used ${growth('heapMiB')}.`,
  );
  const worstP99 = Math.max(...samples.slice(1).map((s) => s.loopP99Ms));
  console.log(`event loop p99 (ms): ${samples.map((s) => s.loopP99Ms.toFixed(1)).join(', ')}`);
  report.row({ name: 'event loop delay p99, worst minute', unit: 'ms', converge: worstP99, better: 'lower', goal: { atMost: 50 } });
  // The first minute holds the start (the first bulk send, every node's first report).
  const settled = turns.slice(1);
  if (settled.length > 0) {
    const worst = settled.reduce((w, t) => (t.p99 > w.p99 ? t : w));
    console.log(
      `engine thread CPU per turn, p99 / max each minute (ms): ${turns.map((t) => `${t.p99.toFixed(1)}/${t.max.toFixed(0)}`).join(', ')}`,
    );
    report.row({
      name: "the engine thread's CPU in one event-loop turn, p99, worst minute",
      unit: 'ms',
      converge: worst.p99,
      better: 'lower',
      goal: { atMost: 50 },
      notes: `the engine's own share of the loop delay, whatever the machine's load: the CPU between two ticks of a 1 ms timer, from the kernel (bench/support/turnProbe.mjs); that minute's longest turn ${worst.max.toFixed(0)} ms, the run's ${Math.max(...settled.map((t) => t.max)).toFixed(0)} ms; minute 1 (the start) left out`,
    });
  }
  report.note(
    `Traffic: ${traffic.reports} reports (${traffic.reportErrors} failed), ${traffic.rollouts} rollouts started (${traffic.rolloutErrors} refused), ${traffic.reads} API reads (${traffic.readErrors} failed), ${traffic.sseEvents} stream events; serve exited ${exitCode} on SIGTERM.`,
  );
  report.note(
    'The bench process (the simulated fleet) shares the machine with the engine: on two cores the loop delay includes waiting for it.',
  );
  report.end();
}

try {
  await main();
} finally {
  await cleanUp();
}
