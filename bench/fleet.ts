// A fleet through the real broker, end to end, in a vhost of its own: N nodes (BENCH_FLEET_NODES,
// default 100,000) are enrolled first — their inboxes declared ahead of need, as `converge node enroll`
// does, on a few channels — and that phase is timed on its own. Then, timed from the first send: each
// is sent a declaration through the engine's bulk path (sendBatch, memory store), the relay publishes
// (an inbox that exists costs it no declaration token), a few consumer connections drain the inboxes
// as nodes would and publish each node's report, ingest stores them, and the bench waits until every
// node is caught up (its latest report names its latest digest). The broker's peak open files,
// memory and processes come from the management API (/api/nodes); a probe opens a new AMQP
// connection every second and counts the ones that fail. The baseline is bare amqplib doing the
// broker's share of the same work on the enrolled inboxes (publish confirmed, take, publish a report)
// with no engine.
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
import { assertTopology, nodeTopology } from '../src/transport/topology.ts';
import type { DeclarationPublisher } from '../src/transport/port.ts';
import { createBenchReport } from './support/report.ts';

const scale = Number(process.env['CONVERGE_BENCH_SCALE'] ?? 1);
const nodes = Math.max(10, Math.round(Number(process.env['BENCH_FLEET_NODES'] ?? 100_000) * scale));
const drainers = 4;
const drainChannels = 4;
/** Channels enrolling inboxes at once (each declares one inbox at a time). */
const enrollChannels = Number(process.env['BENCH_FLEET_ENROLL_CHANNELS'] ?? 8);
const amqpBase = (process.env['CONVERGE_AMQP_URL'] ?? 'amqp://guest:guest@127.0.0.1:5672').replace(/\/+$/, '');
const managementUrl = process.env['CONVERGE_MANAGEMENT_URL'] ?? 'http://guest:guest@127.0.0.1:15672';
// Deleting a vhost of 100,000 queues takes minutes: the default 10 s timeout would leave it behind.
const admin = createManagementClient({ managementUrl, timeoutMs: 30 * 60_000 });
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

/** Drain inboxes as nodes would: `drainers` connections of `drainChannels` channels, each taking the inboxes handed to it and publishing the node's report. */
async function startDrainers(
  url: string,
  ready: string[],
  total: number,
  onTaken: (node: string, digest: string, ch: Channel) => void,
): Promise<ChannelModel[]> {
  const conns: ChannelModel[] = [];
  const lanes = drainers * drainChannels;
  for (let k = 0; k < drainers; k++) {
    const c = await amqp.connect(url);
    c.on('error', (e: Error) => console.error(`bench/fleet: drainer connection: ${e.message}`));
    conns.push(c);
    for (let j = 0; j < drainChannels; j++) {
      const ch = await c.createConfirmChannel();
      void (async () => {
        for (let next = k * drainChannels + j; ;) {
          const node = ready[next];
          if (node === undefined) {
            if (ready.length >= total) return;
            await sleep(5);
            continue;
          }
          next += lanes;
          const m = await ch.get(nodeQueueOf(node), { noAck: true }).catch(() => false as const);
          if (m !== false) onTaken(node, String(m.properties.messageId), ch);
        }
      })();
    }
  }
  return conns;
}

/** Enrol the fleet: declare every inbox (queue and binding) ahead of need, `enrollChannels` at a time. */
async function enroll(url: string, ids: readonly string[]): Promise<number> {
  const c = await amqp.connect(url);
  c.on('error', (e: Error) => console.error(`bench/fleet: enroll connection: ${e.message}`));
  const setup = await c.createChannel();
  await setup.assertExchange(names.declarationsExchange, 'direct', { durable: true });
  await setup.close();
  const t0 = performance.now();
  let next = 0;
  let lastLine = t0;
  await Promise.all(
    Array.from({ length: enrollChannels }, async () => {
      const ch = await c.createChannel();
      for (let i = next++; i < ids.length; i = next++) {
        await assertTopology(ch, nodeTopology(ids[i]!));
        if (performance.now() - lastLine > 10_000) {
          lastLine = performance.now();
          process.stderr.write(`bench/fleet: enrolled ${next} of ${ids.length}\n`);
        }
      }
      await ch.close();
    }),
  );
  await c.close();
  return (performance.now() - t0) / 1000;
}

/** The broker's share alone, on the enrolled inboxes: publish each declaration confirmed, take it, publish a report. */
async function baseline(url: string, ids: readonly string[]): Promise<number> {
  const c = await amqp.connect(url);
  c.on('error', (e: Error) => console.error(`bench/fleet: baseline connection: ${e.message}`));
  const ch = await c.createConfirmChannel();
  await ch.assertQueue('bench.reports', { durable: true, arguments: { 'x-queue-type': 'quorum' } });
  const ready: string[] = [];
  const t0 = performance.now();
  let reported = 0;
  const conns = await startDrainers(url, ready, ids.length, (node, _digest, dch) => {
    dch.sendToQueue('bench.reports', reportOf(node, 'x'.repeat(64)), { persistent: true });
    reported++;
  });
  for (let i = 0; i < ids.length; i += 500) {
    const batch = ids.slice(i, i + 500);
    for (const node of batch)
      ch.publish(names.declarationsExchange, node, Buffer.alloc(700, 'x'), { persistent: true, mandatory: true, messageId: node });
    await ch.waitForConfirms();
    ready.push(...batch);
  }
  while (reported < ids.length) await sleep(20);
  for (const d of conns) await d.close().catch(() => undefined);
  const seconds = (performance.now() - t0) / 1000;
  await ch.deleteQueue('bench.reports');
  await c.close();
  return seconds;
}

type Run = { send: number; relayAndDrain: number; converged: number; total: number; peaks: Peaks };

async function converge(url: string, ids: readonly string[]): Promise<Run> {
  const transport = await createAmqpTransport({ url, logger });
  const store = createMemoryEventStore();
  const key = generateSigningKey();
  const watch = watchBroker(url);
  const t0 = performance.now();
  const sender = createBatchSender({ store, key });
  for (let i = 0; i < ids.length; i += 1000)
    await sender.sendMany(ids.slice(i, i + 1000).map((node) => ({ node, resources: [{ id: 'web', image: 'x' }] })));
  const tSent = performance.now();
  const inner = transport.declarationPublisher();
  const ready: string[] = [];
  const publisher: DeclarationPublisher = {
    publish: async (d) => (await inner.publish(d), void ready.push(d.node)),
    close: () => inner.close(),
  };
  const relay = createRelay({ store, publisher, logger, batchSize: 500 });
  const ingest = createIngest({ store, source: transport.ingestSource(), logger, trustMissingUserId: true });
  await ingest.start();
  let taken = 0;
  const conns = await startDrainers(url, ready, ids.length, (node, digest, ch) => {
    taken++;
    ch.publish(names.meshExchange, names.reportKey, reportOf(node, digest), {
      persistent: true,
      messageId: randomBytes(16).toString('hex'),
      contentType: 'application/json',
    });
  });
  relay.start();
  let lastLine = performance.now();
  while (taken < ids.length) {
    await sleep(50);
    if (performance.now() - lastLine > 10_000) {
      lastLine = performance.now();
      process.stderr.write(`bench/fleet: ${ready.length} published, ${taken} taken of ${ids.length}\n`);
    }
  }
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
  return {
    send: (tSent - t0) / 1000,
    relayAndDrain: (tDrained - tSent) / 1000,
    converged: (tDone - tDrained) / 1000,
    total: (tDone - t0) / 1000,
    peaks,
  };
}

async function main(): Promise<void> {
  const probe = await admin.request('GET', '/overview').catch((e: unknown) => ({ status: 0, body: String(e) }));
  if (probe.status !== 200) throw new Error(`bench/fleet needs RabbitMQ with its management API at ${managementUrl}`);
  const vhost = await newVhost();
  const url = `${amqpBase}/${seg(vhost)}`;
  const ids = Array.from({ length: nodes }, (_, i) => `f${String(i).padStart(6, '0')}`);
  process.stderr.write(`bench/fleet: enrolling ${nodes} nodes (their inboxes, ${enrollChannels} channels)…\n`);
  const enrollWatch = watchBroker(url);
  const enrolled = await enroll(url, ids);
  const enrollPeaks = await enrollWatch.stop();
  process.stderr.write(`bench/fleet: baseline, ${nodes} nodes…\n`);
  const base = await baseline(url, ids);
  process.stderr.write(`bench/fleet: Converge, ${nodes} nodes…\n`);
  const run = await converge(url, ids);
  const deleteSeconds = await removeVhost();
  const report = createBenchReport(
    'A fleet through the broker',
    `${nodes} nodes in a vhost of the bench's own, enrolled first (inboxes declared ahead of need, timed apart); then from the first send: bulk send (memory store), relay, ${drainers} consumer connections of ${drainChannels} channels draining the inboxes and publishing each report, ingest, all caught up. Baseline: bare amqplib doing the broker's share (publish confirmed, take, report) on the same inboxes.`,
  );
  report.row({
    name: 'first send to all converged',
    unit: 's',
    better: 'lower',
    converge: run.total,
    baseline: base,
    ...(nodes >= 100_000 ? { goal: { atMost: 300 } } : {}),
    notes: 'goal at 100,000 nodes: 5 minutes',
    headline: true,
  });
  report.row({ name: 'bulk send (recorded in the store)', unit: 's', better: 'lower', converge: run.send });
  report.row({ name: 'relay: declarations published and taken', unit: 's', better: 'lower', converge: run.relayAndDrain });
  report.row({ name: 'last report taken to all caught up', unit: 's', better: 'lower', converge: run.converged });
  report.row({
    name: `enrolment ahead of need: ${nodes} inboxes declared and bound (${enrollChannels} channels)`,
    unit: 's',
    better: 'lower',
    converge: enrolled,
    notes: `${Math.round(nodes / enrolled)} inboxes/s; ${enrollPeaks.probeFailures} of ${enrollPeaks.probes + enrollPeaks.probeFailures} probe handshakes failed meanwhile; peak open files ${enrollPeaks.fd}`,
  });
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
    name: 'probe handshakes failed from the first send to all converged',
    unit: 'connections',
    better: 'lower',
    converge: run.peaks.probeFailures,
    goal: { atMost: 0 },
    notes: `of ${run.peaks.probes + run.peaks.probeFailures}`,
  });
  report.note(`Deleting the vhost with its ${nodes} inboxes took ${deleteSeconds.toFixed(1)} s.`);
  report.end();
}

main().catch(async (e: unknown) => {
  await removeVhost();
  console.error(e);
  process.exit(1);
});
