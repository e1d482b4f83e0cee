// A fleet through the real broker, end to end, in a vhost of its own: N nodes (BENCH_FLEET_NODES,
// default 100,000) are sent a declaration through the engine's bulk path (sendBatch, memory store),
// the relay declares their inboxes and publishes, a few consumer connections drain the inboxes as
// nodes would and publish each node's report, ingest stores them, and the bench waits until every
// node is caught up (its latest report names its latest digest). The broker's peak open files,
// memory and processes come from the management API (/api/nodes); a probe opens a new AMQP
// connection every second and counts the ones that fail. The baseline is a bare amqplib loop doing
// the broker's share of the same work (declare, bind, publish, take, report) with no engine.
//   BENCH_FLEET_NODES=10000 npm run bench -- fleet
import { randomBytes } from 'node:crypto';
import amqp from 'amqplib';
import type { Channel, ChannelModel } from 'amqplib';
import pino from 'pino';
import { foldNodeEvents } from '../projections/index.ts';
import { createManagementClient, seg } from '../src/brokerAdmin/managementClient.ts';
import { generateSigningKey } from '../src/core/declaration/index.ts';
import { streamOf } from '../src/core/events/index.ts';
import { encodeReport } from '../src/core/wire/index.ts';
import { createIngest } from '../src/engine/ingest/index.ts';
import { createRelay } from '../src/engine/relay.ts';
import { createBatchSender } from '../src/engine/sendBatch.ts';
import { createMemoryEventStore } from '../src/store/memoryEventStore.ts';
import { createAmqpTransport } from '../src/transport/amqpTransport.ts';
import { names, nodeQueueOf } from '../src/transport/brokerNames.ts';
import { inboxArguments } from '../src/transport/topology.ts';
import type { DeclarationPublisher } from '../src/transport/port.ts';
import { createBenchReport } from './support/report.ts';

const scale = Number(process.env['CONVERGE_BENCH_SCALE'] ?? 1);
const nodes = Math.max(10, Math.round(Number(process.env['BENCH_FLEET_NODES'] ?? 100_000) * scale));
const drainers = 4;
const amqpBase = (process.env['CONVERGE_AMQP_URL'] ?? 'amqp://guest:guest@127.0.0.1:5672').replace(/\/+$/, '');
const managementUrl = process.env['CONVERGE_MANAGEMENT_URL'] ?? 'http://guest:guest@127.0.0.1:15672';
const admin = createManagementClient({ managementUrl });
const logger = pino({ level: 'silent' });
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

let liveVhost: string | null = null;
async function newVhost(): Promise<string> {
  const vhost = `bench-fleet-${randomBytes(4).toString('hex')}`;
  if ((await admin.request('PUT', `/vhosts/${seg(vhost)}`, {})).status >= 300) throw new Error(`cannot create vhost ${vhost}`);
  liveVhost = vhost;
  await admin.request('PUT', `/permissions/${seg(vhost)}/guest`, { configure: '.*', write: '.*', read: '.*' });
  return vhost;
}
async function removeVhost(): Promise<number> {
  const v = liveVhost;
  if (v === null) return 0;
  liveVhost = null;
  const t0 = performance.now();
  const r = await admin.request('DELETE', `/vhosts/${seg(v)}`).catch(() => ({ status: 0 }));
  if (r.status !== 204) console.error(`bench/fleet: could not delete vhost ${v}; delete it by hand (HTTP ${r.status})`);
  return (performance.now() - t0) / 1000;
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => void removeVhost().finally(() => process.exit(130)));

type Peaks = { fd: number; mem: number; proc: number; probes: number; probeFailures: number; fdLimit: number };
/** Samples /api/nodes and probes a new AMQP handshake every second until stopped. */
function watchBroker(url: string): { stop: () => Promise<Peaks> } {
  const peaks: Peaks = { fd: 0, mem: 0, proc: 0, probes: 0, probeFailures: 0, fdLimit: 0 };
  let on = true;
  const loop = (async () => {
    while (on) {
      const r = await admin.request('GET', '/nodes?columns=fd_used,fd_total,mem_used,proc_used').catch(() => null);
      for (const n of (r?.body as { fd_used: number; fd_total: number; mem_used: number; proc_used: number }[] | null) ?? []) {
        peaks.fd = Math.max(peaks.fd, n.fd_used);
        peaks.mem = Math.max(peaks.mem, n.mem_used);
        peaks.proc = Math.max(peaks.proc, n.proc_used);
        peaks.fdLimit = n.fd_total;
      }
      try {
        const c = await amqp.connect(url, { timeout: 10_000 });
        await c.close();
        peaks.probes++;
      } catch {
        peaks.probeFailures++;
      }
      await sleep(1000);
    }
  })();
  return { stop: async () => ((on = false), await loop, peaks) };
}

const reportOf = (node: string, digest: string): Buffer =>
  encodeReport({ node, applied: ['web'], failed: {}, refused: '', carried: [], declared: digest });

/** Drain inboxes as nodes would: `drainers` connections, each taking the inboxes handed to it and publishing the node's report. */
async function startDrainers(
  url: string,
  ready: string[],
  onTaken: (node: string, digest: string, ch: Channel) => void,
): Promise<ChannelModel[]> {
  const conns: ChannelModel[] = [];
  for (let k = 0; k < drainers; k++) {
    const c = await amqp.connect(url);
    c.on('error', (e: Error) => console.error(`bench/fleet: drainer connection: ${e.message}`));
    conns.push(c);
    const ch = await c.createConfirmChannel();
    void (async () => {
      for (let next = k; ;) {
        const node = ready[next];
        if (node === undefined) {
          if (ready.length >= nodes) return;
          await sleep(5);
          continue;
        }
        next += drainers;
        const m = await ch.get(nodeQueueOf(node), { noAck: true }).catch(() => false as const);
        if (m !== false) onTaken(node, String(m.properties.messageId), ch);
      }
    })();
  }
  return conns;
}

type Run = { send: number; relayAndDrain: number; converged: number; total: number; peaks: Peaks; deleteSeconds: number };

async function converge(): Promise<Run> {
  const vhost = await newVhost();
  const url = `${amqpBase}/${seg(vhost)}`;
  const transport = await createAmqpTransport({ url, logger });
  const store = createMemoryEventStore();
  const key = generateSigningKey();
  const watch = watchBroker(url);
  const t0 = performance.now();
  const sender = createBatchSender({ store, key });
  const ids = Array.from({ length: nodes }, (_, i) => `f${String(i).padStart(6, '0')}`);
  for (let i = 0; i < nodes; i += 1000)
    await sender.sendMany(ids.slice(i, i + 1000).map((node) => ({ node, resources: [{ id: 'web', image: 'x' }] })));
  const tSent = performance.now();
  const inner = transport.declarationPublisher();
  const ready: string[] = [];
  const publisher: DeclarationPublisher = {
    publish: async (d) => (await inner.publish(d), void ready.push(d.node)),
    close: () => inner.close(),
  };
  const relay = createRelay({ store, publisher, logger, batchSize: 500 });
  const ingest = createIngest({
    store,
    source: transport.ingestSource(),
    logger,
    trustMissingUserId: true,
  });
  await ingest.start();
  let taken = 0;
  const conns = await startDrainers(url, ready, (node, digest, ch) => {
    taken++;
    ch.publish(names.meshExchange, names.reportKey, reportOf(node, digest), {
      persistent: true,
      messageId: randomBytes(16).toString('hex'),
      contentType: 'application/json',
    });
  });
  relay.start();
  while (taken < nodes) await sleep(50);
  const tDrained = performance.now();
  const pending = new Set(ids);
  while (pending.size > 0) {
    for (const node of [...pending]) if (foldNodeEvents(node, await store.readStream(streamOf(node))).caughtUp) pending.delete(node);
    if (pending.size > 0) await sleep(500);
  }
  const tDone = performance.now();
  const peaks = await watch.stop();
  await relay.stop();
  await ingest.stop();
  await publisher.close();
  for (const c of conns) await c.close().catch(() => undefined);
  await transport.close();
  const deleteSeconds = await removeVhost();
  return {
    send: (tSent - t0) / 1000,
    relayAndDrain: (tDrained - tSent) / 1000,
    converged: (tDone - tDrained) / 1000,
    total: (tDone - t0) / 1000,
    peaks,
    deleteSeconds,
  };
}

/** The broker's share alone: declare and bind each inbox, publish to it, take it, publish a report to a plain queue. */
async function baseline(): Promise<number> {
  const vhost = await newVhost();
  const url = `${amqpBase}/${seg(vhost)}`;
  const c = await amqp.connect(url);
  c.on('error', (e: Error) => console.error(`bench/fleet: baseline connection: ${e.message}`));
  const ch = await c.createConfirmChannel();
  await ch.assertExchange(names.declarationsExchange, 'direct', { durable: true });
  await ch.assertQueue('reports', { durable: true, arguments: { 'x-queue-type': 'quorum' } });
  const t0 = performance.now();
  for (let i = 0; i < nodes; i++) {
    const q = `node.b${i}`;
    await ch.assertQueue(q, { durable: true, arguments: { ...inboxArguments } });
    await ch.bindQueue(q, names.declarationsExchange, `b${i}`);
    ch.publish(names.declarationsExchange, `b${i}`, Buffer.alloc(700, 'x'), { persistent: true, mandatory: true });
    await ch.waitForConfirms();
    await ch.get(q, { noAck: true });
    ch.sendToQueue('reports', reportOf(`b${i}`, 'x'.repeat(64)), { persistent: true });
  }
  await ch.waitForConfirms();
  const seconds = (performance.now() - t0) / 1000;
  await c.close();
  await removeVhost();
  return seconds;
}

async function main(): Promise<void> {
  const probe = await admin.request('GET', '/overview').catch((e: unknown) => ({ status: 0, body: String(e) }));
  if (probe.status !== 200) throw new Error(`bench/fleet needs RabbitMQ with its management API at ${managementUrl}`);
  process.stderr.write(`bench/fleet: baseline, ${nodes} nodes…\n`);
  const base = await baseline();
  process.stderr.write(`bench/fleet: Converge, ${nodes} nodes…\n`);
  const run = await converge();
  const report = createBenchReport(
    'A fleet through the broker',
    `${nodes} nodes in a vhost of the bench's own: bulk send (memory store), relay, ${drainers} consumer connections draining the inboxes and publishing each report, ingest, all caught up. Baseline: a bare amqplib loop doing the broker's share (declare, bind, publish, take, report) on one channel.`,
  );
  report.row({
    name: 'first send to all converged',
    unit: 's',
    better: 'lower',
    converge: run.total,
    baseline: base,
    ...(nodes >= 100_000 ? { goal: { atMost: 300 } } : {}),
    notes: 'goal at 100,000 nodes: 5 minutes',
  });
  report.row({ name: 'bulk send (recorded in the store)', unit: 's', better: 'lower', converge: run.send });
  report.row({
    name: 'relay: inboxes declared, declarations published and taken',
    unit: 's',
    better: 'lower',
    converge: run.relayAndDrain,
  });
  report.row({ name: 'last report taken to all caught up', unit: 's', better: 'lower', converge: run.converged });
  report.row({
    name: 'broker peak open files (fd_used)',
    unit: 'fds',
    better: 'lower',
    converge: run.peaks.fd,
    notes: `limit ${run.peaks.fdLimit}`,
  });
  report.row({ name: 'broker peak memory (mem_used)', unit: 'MiB', better: 'lower', converge: run.peaks.mem / 1024 / 1024 });
  report.row({ name: 'broker peak Erlang processes (proc_used)', unit: 'processes', better: 'lower', converge: run.peaks.proc });
  report.row({
    name: 'probe handshakes failed while it ran',
    unit: 'connections',
    better: 'lower',
    converge: run.peaks.probeFailures,
    goal: { atMost: 0 },
    notes: `of ${run.peaks.probes + run.peaks.probeFailures}`,
  });
  report.note(`Deleting the vhost with its ${nodes} inboxes took ${run.deleteSeconds.toFixed(1)} s.`);
  report.end();
}

main().catch(async (e: unknown) => {
  await removeVhost();
  console.error(e);
  process.exit(1);
});
