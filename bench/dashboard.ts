// The dashboard at size. Two questions, each beside a baseline from the same run:
//   1. Time to first render of the fleet page in headless Chromium (cold: no cache, token already
//      in session storage), with 10,000 and 100,000 nodes in the store: navigation start → the
//      summary and the first table page are in the DOM (the page's own performance marks), against
//      the API alone answering the same data (GET /v1/fleet and GET /v1/nodes?limit=50, in parallel
//      as the page asks them) from Node. Passes alternate, page then API.
//   2. GET /v1/fleet?at= with 100,000 nodes and 1,000,000 events: the history src/readModel/fleetHistory.ts
//      keeps, asked at positions across the store, against folding the store up to the position and
//      summarising (createFleetFold + summarizeFleet), in this process; and over HTTP on serve,
//      against GET /v1/fleet (now). Plus the history's memory.
// Each node's history is ten events: send #1, alive, its report, alive, send #2, alive, a late
// report of #1 (the seed's race), alive, the report of #2, alive.
//   npm run bench -- dashboard       CONVERGE_BENCH_SCALE=0.1 for a tenth of the nodes
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { createFleetFold, summarizeFleet } from '../projections/index.ts';
import type { At } from '../projections/index.ts';
import { generateSigningKey } from '../src/core/declaration/index.ts';
import { makeAliveSeen, makeDeclarationSent, makeReportReceived, streamOf } from '../src/core/events/index.ts';
import { createFleetHistory } from '../src/readModel/fleetHistory.ts';
import { createReadModel } from '../src/readModel/readModel.ts';
import { createSqliteEventStore } from '../src/store/sqlite/sqliteEventStore.ts';
import type { NewEvent, StreamWrite } from '../src/store/index.ts';
import { encodeReport } from '../src/core/wire/index.ts';
import { launchChromium } from '../test/support/browser.ts';
import { createBenchReport } from './support/report.ts';
import { spawnServe } from './support/serveProcess.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const root = new URL('..', import.meta.url).pathname;
const scale = Number(process.env['CONVERGE_BENCH_SCALE'] ?? 1);
const sizes = [Math.round(10_000 * scale), Math.round(100_000 * scale)];
const passes = 5;
const token = 'bench-dashboard-token-0123456789';
const dir = mkdtempSync(join(tmpdir(), 'converge-bench-dashboard-'));
const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');

if (!existsSync(join(root, 'dist/src/cli/main.js')) || !existsSync(join(root, 'dist/dashboard/index.html'))) {
  console.error('bench/dashboard: dist/ or dist/dashboard is missing; run `npm run build` first');
  process.exit(1);
}

/** `nodes` nodes, ten events each, appended in rounds so positions interleave nodes as a live fleet's do. */
async function build(path: string, nodes: number): Promise<number> {
  const store = createSqliteEventStore(path);
  const key = generateSigningKey();
  const ids = Array.from({ length: nodes }, (_, i) => `node-${String(i).padStart(6, '0')}`);
  const sent = new Map<string, string[]>();
  const specs = Array.from({ length: 10 }, (_, i) => [{ id: 'web', image: `web:${i}` }, { id: 'db' }]);
  const send = (serial: number) => (node: string, i: number, at: Date) => {
    const e = makeDeclarationSent({ node, serial, resources: specs[(i + serial) % specs.length]!, key, now: at });
    sent.set(node, [...(sent.get(node) ?? []), e.data.digest]);
    return e;
  };
  const report = (serial: number) => (node: string, i: number, at: Date) => {
    const r = { node, applied: ['web', 'db'], failed: {}, refused: '', carried: [], declared: sent.get(node)![serial - 1]! };
    return makeReportReceived(r, encodeReport(r), { messageId: `m-${serial}-${i}-${at.getTime()}`, redelivered: false, userId: node }, at);
  };
  const alive = (node: string, _i: number, at: Date) => makeAliveSeen({ node }, at);
  const rounds: ((node: string, i: number, at: Date) => NewEvent)[] = [
    send(1),
    alive,
    report(1),
    alive,
    send(2),
    alive,
    report(1),
    alive,
    report(2),
    alive,
  ];
  // A round (one event for every node) spans less than the grace period at every size, as a live
  // fleet's alives do (every 15 s): presence then stays one interval per node.
  let clock = Date.parse('2026-01-01T00:00:00Z');
  const step = Math.min(2, 40_000 / nodes);
  let events = 0;
  for (const make of rounds) {
    for (let i = 0; i < ids.length; i += 2_000) {
      const writes: StreamWrite[] = ids.slice(i, i + 2_000).map((node, j) => {
        clock += step;
        return { stream: streamOf(node), expected: 'any', events: [make(node, i + j, new Date(Math.round(clock)))] };
      });
      await store.append(writes);
      events += writes.length;
    }
  }
  await store.close();
  return events;
}

function get(url: string): Promise<{ status: number; ms: number; body: string }> {
  const t = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(url, { agent: false, headers: { authorization: `Bearer ${token}`, 'accept-encoding': 'identity' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - t, body: Buffer.concat(chunks).toString() }));
    });
    req.on('error', reject);
    req.end();
  });
}

type Serve = Readonly<{ url: string; stop: () => Promise<void> }>;

async function startServe(storePath: string): Promise<Serve> {
  const { proc, url, exited } = await spawnServe(root, storePath, ['--api-tokens', `${token}:read`]);
  while ((await get(`${url}/readyz`)).status !== 200) await new Promise((r) => setTimeout(r, 20));
  return {
    url,
    stop: async () => {
      proc.kill('SIGTERM');
      await exited;
    },
  };
}

const report = createBenchReport(
  'Dashboard',
  'Time to first render of the fleet page in headless Chromium (cold cache) against the API alone answering the same data, alternating passes; ' +
    'and GET /v1/fleet?at= from the fleet history against folding the store to the same position.',
);

const browser = await launchChromium();
let bigStore: { path: string; events: number } | null = null;
try {
  for (const nodes of sizes) {
    const path = join(dir, `fleet-${nodes}.db`);
    const t = performance.now();
    const events = await build(path, nodes);
    console.error(`built ${fmt(nodes)} nodes, ${fmt(events)} events in ${fmt(performance.now() - t)} ms`);
    if (nodes === sizes[1]) bigStore = { path, events };
    const serve = await startServe(path);
    try {
      const api: number[] = [];
      const page: number[] = [];
      for (let p = 0; p < passes; p++) {
        const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
        await context.addInitScript(`sessionStorage.setItem('converge.token', ${JSON.stringify(token)})`);
        const tab = await context.newPage();
        await tab.goto(`${serve.url}/`);
        const marks = ['converge:fleet-summary', 'converge:node-table'];
        await tab.waitForFunction((names: string[]) => names.every((n) => performance.getEntriesByName(n).length > 0), marks, {
          timeout: 120_000,
          polling: 20,
        });
        const at = await tab.evaluate(
          (names: string[]) => Math.max(...names.map((n) => performance.getEntriesByName(n)[0]!.startTime)),
          marks,
        );
        page.push(at);
        await context.close();
        await new Promise((r) => setTimeout(r, 300));
        const s = performance.now();
        const [fleet, list] = await Promise.all([get(`${serve.url}/v1/fleet`), get(`${serve.url}/v1/nodes?limit=50`)]);
        if (fleet.status !== 200 || list.status !== 200) throw new Error(`API answered ${fleet.status}/${list.status}`);
        api.push(performance.now() - s);
      }
      report.row({
        name: `fleet page first render, ${fmt(nodes)} nodes (${fmt(events)} events)`,
        unit: 'ms',
        converge: page,
        baseline: api,
        better: 'lower',
        notes: 'page: navigation start to summary and table in the DOM; baseline: GET /v1/fleet + GET /v1/nodes?limit=50 from Node',
      });

      // The slider on serve: the fleet as of positions across the store, against the fleet now.
      const head = BigInt(JSON.parse((await get(`${serve.url}/v1/fleet`)).body).position as string);
      const atMs: number[] = [];
      const nowMs: number[] = [];
      for (let i = 1; i <= 20; i++) {
        atMs.push((await get(`${serve.url}/v1/fleet?at=${(head * BigInt(i)) / 21n}`)).ms);
        nowMs.push((await get(`${serve.url}/v1/fleet`)).ms);
      }
      report.row({
        name: `GET /v1/fleet?at= over HTTP, ${fmt(nodes)} nodes`,
        unit: 'ms',
        converge: median(atMs),
        baseline: median(nowMs),
        better: 'lower',
        goal: { atMost: 100 },
        notes: 'median of 20 positions across the store (the first includes nothing extra: serve folded cold); baseline: GET /v1/fleet now',
      });
    } finally {
      await serve.stop();
    }
  }

  // In this process: the history against folding the store to the same positions.
  if (bigStore !== null) {
    const store = createSqliteEventStore(bigStore.path);
    const readModel = createReadModel();
    gc();
    const heapBefore = process.memoryUsage().heapUsed;
    const history = createFleetHistory({ store, readModel });
    const t = performance.now();
    for await (const batch of store.readAll({ streamPrefix: 'node-' })) readModel.apply(batch);
    const foldMs = performance.now() - t;
    gc();
    const stats = history.stats();
    const positions = [1n, 3n, 5n, 7n, 9n].map((k) => (readModel.position()! * k) / 10n);
    const historyMs: number[] = [];
    const foldFromZeroMs: number[] = [];
    for (const position of positions) {
      const at: At = { kind: 'position', position };
      const h = performance.now();
      const fromHistory = await history.at(at);
      historyMs.push(performance.now() - h);
      const f = performance.now();
      const fold = createFleetFold(at);
      for await (const batch of store.readAll({ streamPrefix: 'node-' })) {
        for (const e of batch) fold.push(e);
        if (batch.at(-1)!.position > position) break;
      }
      const summary = summarizeFleet(fold.states().values(), Date.parse(fromHistory.moment!));
      foldFromZeroMs.push(performance.now() - f);
      if (summary.nodes !== fromHistory.nodes || summary.byStatus.behind !== fromHistory.byStatus.behind)
        throw new Error(`history and fold disagree at ${position}`);
    }
    report.row({
      name: `fleet as of a position, ${fmt(sizes[1]!)} nodes, ${fmt(bigStore.events)} events`,
      unit: 'ms',
      converge: historyMs,
      baseline: foldFromZeroMs,
      better: 'lower',
      goal: { atMost: 100 },
      notes: 'history.at() vs reading the store up to the position, folding and summarising; positions at 10–90 % of the store',
    });
    report.note(
      `Fleet history at ${fmt(sizes[1]!)} nodes / ${fmt(bigStore.events)} events: ${fmt(stats.rows)} rows, ${fmt(stats.intervals)} presence intervals, ` +
        `${(stats.bytes / 1024 / 1024).toFixed(1)} MiB of typed arrays (heap +${((process.memoryUsage().heapUsed - heapBefore) / 1024 / 1024).toFixed(0)} MiB with the read model); ` +
        `recorded while the read model folded the store in ${fmt(foldMs)} ms.`,
    );
    history.stop();
    await store.close();
  }
  report.note('Shared 2-core machine: the browser, serve and this process compete; the spreads say how much the figures moved.');
  report.end();
} finally {
  await browser.close();
  rmSync(dir, { recursive: true, force: true });
}
