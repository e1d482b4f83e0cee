// bench/engine.ts's latency part: on a serve under a steady load of reports, report → visible
// (publish → the report's state on GET /v1/events) and `await` wake-up (publish of the matching
// report → the pending GET /v1/nodes/:node/await answers), p50 and p99.
import { request } from 'node:http';
import type { IncomingMessage } from 'node:http';
import { join } from 'node:path';
import amqp from 'amqplib';
import type { BenchReport } from '../support/report.ts';
import { httpGet, pct, sleep } from './children.ts';
import type { Child } from './children.ts';

export type LatencyContext = Readonly<{
  dir: string;
  /** A store holding one declaration per node; the digests sent. */
  prefillStore: (path: string, nodes: readonly string[]) => Promise<{ digests: ReadonlyMap<string, string> }>;
  /** `converge serve` on a store, its burst raised to hold `perNode` reports. */
  startServe: (path: string, perNode: number) => Child & { url: Promise<string> };
  /** A broker URL that may publish with any node's user_id. */
  publisherUrl: () => string;
  reportBody: (node: string, declared: string) => Buffer;
  report: BenchReport;
  /** Reports a second, for `seconds`, with `probes` await probes among them. */
  rate: number;
  seconds: number;
  probes: number;
}>;

const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');

/** report → visible and await wake-up on a serve under a steady load of `rate` reports/s. */
export async function measureLatency(c: LatencyContext): Promise<void> {
  const { dir, prefillStore, startServe, publisherUrl, reportBody, report, rate, seconds, probes } = c;
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
