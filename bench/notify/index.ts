// Notification delivery latency: the triggering event appended (its append resolved, durable in
// SQLite) → the webhook request received, p50/p99, for `node.refused` at a steady rate through
// the projections and one webhook destination (signed, CloudEvents, coalescing window wide enough
// that each is sent alone). Against the floor in the same run: a bare fetch POST of a body of the
// same size to the same receiver, timed from just before the call. Both sides in this process on
// one clock (performance.now); passes alternate.
// And ingest with a receiver that takes 10 s to answer: reports through the engine's ingest
// (in-process broker, SQLite), acked and folded, with a webhook destination whose every request is
// held 10 s, against the same ingest with no notifications, passes alternating (ingest.ts).
// Run: npm run bench -- notify   (BENCH_NOTIFY_RATE=200 notifications/s, BENCH_NOTIFY_INGEST=20000 reports,
// CONVERGE_BENCH_SCALE=0.1 for a quick look)
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import pino from 'pino';
import { createNotifier, parseNotifyConfig } from '../../src/notify/index.ts';
import { createProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { historyInStore } from '../../test/support/history.ts';
import { createBenchReport } from '../support/report.ts';
import { ingestPass, startSlowReceiver } from './ingest.ts';

const scale = Number(process.env['CONVERGE_BENCH_SCALE'] ?? 1);
const count = Math.max(100, Math.round(2_000 * scale));
const rate = Number(process.env['BENCH_NOTIFY_RATE'] ?? 200);
const passes = 2;
const logger = pino({ level: 'silent' });
const dir = mkdtempSync(join(tmpdir(), 'converge-bench-notify-'));

const report = createBenchReport(
  'Notifications: event appended → webhook received',
  `${count.toLocaleString('en-US')} \`node.refused\` notifications at ${rate}/s, each from its report appended to SQLite (the append resolved) ` +
    'to the webhook request received (signed CloudEvent, one destination, through the projections), against a bare fetch POST of ' +
    'a body of the same size to the same receiver, in the same process and run, passes alternating.',
);

/** Arrival time of each request by key: the node a notification names, or the baseline's header. */
const arrived = new Map<string, number>();
let bodyBytes = 1_000;
const receiver = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const at = performance.now();
    const body = Buffer.concat(chunks).toString('utf8');
    const key = req.headers['x-bench-key'];
    if (typeof key === 'string') arrived.set(key, at);
    else {
      bodyBytes = body.length;
      const e = JSON.parse(body) as { data: { notifications: { node: string }[] } };
      for (const n of e.data.notifications) arrived.set(n.node, at);
    }
    res.writeHead(200).end('ok');
  });
});
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', () => resolve()));
const address = receiver.address();
if (address === null || typeof address === 'string') throw new Error('no address');
const url = `http://127.0.0.1:${address.port}/hook`;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const until = async (f: () => boolean): Promise<void> => {
  const deadline = performance.now() + 120_000;
  while (!f()) {
    if (performance.now() > deadline) throw new Error('bench/notify: deliveries did not all arrive within 120 s');
    await sleep(5);
  }
};
const pct = (sorted: readonly number[], p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;

/** Per Converge pass: append → folded p50 (ms), and the append rate reached (the appends are awaited one by one). */
const foldP50: number[] = [];
const achieved: number[] = [];

/** Converge: appends at `rate`, each report refused; latency from its append resolved to its arrival. */
async function convergePass(pass: number): Promise<number[]> {
  // As serve writes it (--sqlite-sync thread): the fsync on a thread of its own, not the event loop.
  const store = createSqliteEventStore(join(dir, `notify-${pass}.db`), { sync: 'thread' });
  const config = parseNotifyConfig(
    JSON.stringify({
      destinations: [
        {
          name: 'bench',
          kind: 'webhook',
          url,
          secret: { env: 'BENCH_SECRET' },
          coalesce: { windowMs: 1_000, maxPerWindow: 10_000, firstNodes: 20 },
        },
      ],
    }),
    'bench.json',
    { BENCH_SECRET: 'bench-secret' },
  );
  const runner = createProjectionRunner({ store, logger });
  const notifier = createNotifier({ config, store, readModel: runner.readModel, logger });
  await notifier.prepare();
  await runner.start();
  await notifier.begin();
  await runner.caughtUp();
  const folded = new Map<string, number>();
  runner.readModel.onChange((c) => {
    if (c.event.type === 'ReportReceived') folded.set(c.node, performance.now());
  });
  const h = historyInStore(store);
  const nodes = Array.from({ length: count }, (_, i) => `p${pass}-n${i}`);
  const digests = new Map<string, string>();
  for (const n of nodes) digests.set(n, (await h.send(n)).digest);
  const appended = new Map<string, number>();
  const gap = 1_000 / rate;
  const start = performance.now();
  for (let i = 0; i < nodes.length; i++) {
    const n = nodes[i]!;
    const due = start + i * gap;
    const wait = due - performance.now();
    if (wait > 1) await sleep(wait);
    await h.report(n, { declared: digests.get(n)!, refused: 'bench: refused' });
    appended.set(n, performance.now());
  }
  await until(() => nodes.every((n) => arrived.has(n)));
  await notifier.stop();
  await runner.stop();
  await store.close();
  const toFold = nodes.map((n) => folded.get(n)! - appended.get(n)!).sort((a, b) => a - b);
  foldP50.push(pct(toFold, 50));
  achieved.push(count / ((appended.get(nodes[nodes.length - 1]!)! - start) / 1000));
  return nodes.map((n) => arrived.get(n)! - appended.get(n)!).sort((a, b) => a - b);
}

/** The floor: a bare POST of a body as large, at the same rate. */
async function baselinePass(pass: number): Promise<number[]> {
  const body = 'x'.repeat(bodyBytes);
  const gap = 1_000 / rate;
  const start = performance.now();
  const sent = new Map<string, number>();
  const inflight: Promise<unknown>[] = [];
  for (let i = 0; i < count; i++) {
    const key = `b${pass}-${i}`;
    const wait = start + i * gap - performance.now();
    if (wait > 1) await sleep(wait);
    sent.set(key, performance.now());
    inflight.push(
      fetch(url, { method: 'POST', headers: { 'content-type': 'application/cloudevents+json', 'x-bench-key': key }, body }).then((r) =>
        r.text(),
      ),
    );
  }
  await Promise.all(inflight);
  await until(() => [...sent.keys()].every((k) => arrived.has(k)));
  return [...sent].map(([k, t]) => arrived.get(k)! - t).sort((a, b) => a - b);
}

try {
  const converge: number[][] = [];
  const baseline: number[][] = [];
  for (let pass = 0; pass < passes; pass++) {
    if (pass % 2 === 0) {
      converge.push(await convergePass(pass));
      baseline.push(await baselinePass(pass));
    } else {
      baseline.push(await baselinePass(pass));
      converge.push(await convergePass(pass));
    }
  }
  for (const p of [50, 99]) {
    report.row({
      name: `appended → webhook received, p${p}`,
      unit: 'ms',
      better: 'lower',
      converge: converge.map((c) => pct(c, p)),
      baseline: baseline.map((b) => pct(b, p)),
      notes: `per pass ${converge.map((c) => pct(c, p).toFixed(1)).join(', ')} ms; baseline: a bare fetch POST of the same size, call → received`,
      headline: false,
    });
  }
  report.note(
    `Per pass: appended → folded p50 ${foldP50.map((x) => x.toFixed(1)).join(', ')} ms; appends reached ${achieved.map((x) => x.toFixed(0)).join(', ')}/s.`,
  );
  const slow = await startSlowReceiver(10_000);
  const reports = Number(process.env['BENCH_NOTIFY_INGEST'] ?? Math.max(2_000, Math.round(20_000 * scale)));
  const withSlow: number[] = [];
  const without: number[] = [];
  let held = 0;
  for (let pass = 0; pass < passes; pass++) {
    const one = async (notify: boolean): Promise<void> => {
      const before = slow.requests();
      const r = await ingestPass({ dir, pass, reports, logger, ...(notify ? { url: slow.url } : {}) });
      (notify ? withSlow : without).push(r.rate);
      if (notify) held = Math.max(held, slow.requests() - before);
    };
    if (pass % 2 === 0) {
      await one(false);
      await one(true);
    } else {
      await one(true);
      await one(false);
    }
  }
  await slow.close();
  report.row({
    name: 'ingest, reports acked and folded, receiver answering in 10 s',
    unit: 'reports/s',
    converge: withSlow,
    baseline: without,
    goal: { ratioAtLeast: 0.9 },
    notes: `per pass ${withSlow.map((x) => x.toFixed(0)).join(', ')}/s; baseline: the same ingest with no notifications, ${without.map((x) => x.toFixed(0)).join(', ')}/s`,
    headline: false,
  });
  report.note(
    `Ingest rows: ${reports.toLocaleString('en-US')} reports through the in-process broker into SQLite (--sqlite-sync thread), half of them a refusal (one \`node.refused\` each), timed from the first delivery to every report acked and folded; the receiver holds each request 10 s (${held} requests at most reached it during a pass), so the destination's queue fills and spills while ingest runs.`,
  );
  report.note(
    `Body ${bodyBytes} bytes. The latency includes the fold (the projection's subscription hears the append), the trigger, the destination's queue, HMAC signing and the POST; SQLite written as serve writes it (--sqlite-sync thread). The receiver runs in the bench's process.`,
  );
  report.end();
} finally {
  receiver.closeAllConnections();
  receiver.close();
  rmSync(dir, { recursive: true, force: true });
}
