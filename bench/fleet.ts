// A fleet through the real broker, end to end, in a vhost of its own: N nodes (BENCH_FLEET_NODES,
// default 100,000) are enrolled first — their inboxes declared ahead of need, as `converge node enroll`
// does, on a few channels — and that phase is timed on its own. Then, timed from the first send: each
// is sent a declaration through the engine's bulk path (sendBatch, memory store), the relay publishes
// (an inbox that exists costs it no declaration token), a few consumer connections drain the inboxes
// as nodes would and publish each node's report, ingest stores them, and the bench waits until every
// node is caught up (its latest report names its latest digest). The broker's peak open files,
// memory and processes come from the management API (/api/nodes; open files also from /proc when the
// broker is the bench's own); a probe opens a new AMQP connection every second and counts the ones
// that fail. The baseline is bare amqplib doing the broker's share of the same work on the enrolled
// inboxes (publish confirmed, take, publish a report) with no engine.
//
// The broker is, by default, a one-node RabbitMQ the bench starts for itself in a temp folder
// (bench/support/benchBroker.ts), with the open-file limit this shell allows (at most
// BENCH_BROKER_NOFILE), stopped and removed at the end, on failure and on Ctrl-C: 100,000 inboxes
// would exhaust the system broker every other client uses. CONVERGE_AMQP_URL and
// CONVERGE_MANAGEMENT_URL point it at an existing broker instead, in a vhost of its own deleted at
// the end; it refuses a run that broker's open-file limit cannot hold.
//   BENCH_FLEET_NODES=10000 npm run bench -- fleet
import { randomBytes } from 'node:crypto';
import amqp from 'amqplib';
import type { Channel, ChannelModel, ConfirmChannel } from 'amqplib';
import pino from 'pino';
import { foldNodeEvents } from '../projections/index.ts';
import { seg } from '../src/brokerAdmin/managementClient.ts';
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
import { openBenchBroker, watchBroker } from './support/benchBroker.ts';
import type { BenchBroker, BrokerPeaks as Peaks } from './support/benchBroker.ts';
import { createBenchReport } from './support/report.ts';

const scale = Number(process.env['CONVERGE_BENCH_SCALE'] ?? 1);
const nodes = Math.max(10, Math.round(Number(process.env['BENCH_FLEET_NODES'] ?? 100_000) * scale));
const drainers = 4;
const drainChannels = 4;
/** Channels enrolling inboxes at once (each declares one inbox at a time). */
const enrollChannels = Number(process.env['BENCH_FLEET_ENROLL_CHANNELS'] ?? 8);
/** Channels the relay checks inboxes on (BENCH_FLEET_INBOX_LANES; default: the engine's). */
const inboxLanes = process.env['BENCH_FLEET_INBOX_LANES'] === undefined ? undefined : Number(process.env['BENCH_FLEET_INBOX_LANES']);
const logger = pino({ level: 'silent' });
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

let broker: BenchBroker | null = null;
let liveVhost: string | null = null;
async function newVhost(b: BenchBroker): Promise<string> {
  const vhost = `bench-fleet-${randomBytes(4).toString('hex')}`;
  if ((await b.admin.request('PUT', `/vhosts/${seg(vhost)}`, {})).status >= 300) throw new Error(`cannot create vhost ${vhost}`);
  liveVhost = vhost;
  await b.admin.request('PUT', `/permissions/${seg(vhost)}/guest`, { configure: '.*', write: '.*', read: '.*' });
  return vhost;
}
let cleaning: Promise<number> | null = null;
/**
 * Leaves the broker as found: a broker of our own is stopped whole, an existing one loses the vhost. Seconds taken.
 * Every caller (the end, a failure, a signal, which fails the run's pending calls) waits for the one clean-up.
 */
const cleanUp = (): Promise<number> => (cleaning ??= cleanUpOnce());
async function cleanUpOnce(): Promise<number> {
  const b = broker;
  broker = null;
  if (b === null) return 0;
  const t0 = performance.now();
  const v = liveVhost;
  liveVhost = null;
  if (!b.own && v !== null) {
    const r = await b.admin.request('DELETE', `/vhosts/${seg(v)}`).catch(() => ({ status: 0 }));
    if (r.status !== 204) console.error(`bench/fleet: could not delete vhost ${v}; delete it by hand (HTTP ${r.status})`);
  }
  await b.close();
  return (performance.now() - t0) / 1000;
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => void cleanUp().finally(() => process.exit(130)));

const reportOf = (node: string, digest: string): Buffer =>
  encodeReport({ node, applied: ['web'], failed: {}, refused: '', carried: [], declared: digest });

/** What a node does with a declaration it takes: publish its report on the channel it took it on. */
type OnTaken = (node: string, messageId: string, ch: Channel) => void;

/**
 * The fleet online, as nodes consume their inboxes (src/transport/amqpNodeLink.ts: a consumer,
 * prefetch 1, acknowledged once handled): `drainers` connections of `drainChannels` channels
 * sharing the inboxes' consumers. An online node's inbox holds nothing for long, so the broker
 * keeps no files open for it; each phase sets `fleet.onTaken`.
 */
type Fleet = {
  onTaken: OnTaken;
  /** Resolves once the broker confirmed every report published so far. */
  settle: () => Promise<void>;
  /** Throws if a node connection was lost (its consumers with it): the run cannot finish. */
  check: () => void;
  close: () => Promise<void>;
};

async function bringOnline(url: string, ids: readonly string[]): Promise<Fleet> {
  const conns: ChannelModel[] = [];
  const channels: ConfirmChannel[] = [];
  let lost: string | null = null;
  let closing = false;
  const fleet: Fleet = {
    onTaken: () => undefined,
    settle: async () => void (await Promise.all(channels.map((ch) => ch.waitForConfirms()))),
    check: () => {
      if (lost !== null) throw new Error(`bench/fleet: a node connection was lost: ${lost}`);
    },
    close: async () => {
      closing = true;
      for (const c of conns) await c.close().catch(() => undefined);
    },
  };
  for (let k = 0; k < drainers; k++) {
    const c = await amqp.connect(url);
    c.on('error', (e: Error) => (lost ??= e.message));
    c.on('close', () => void (closing || (lost ??= 'closed')));
    conns.push(c);
    for (let j = 0; j < drainChannels; j++) {
      const ch = await c.createConfirmChannel();
      await ch.prefetch(1, false);
      channels.push(ch);
    }
  }
  await Promise.all(
    channels.map(async (ch, lane) => {
      for (let i = lane; i < ids.length; i += channels.length)
        await ch.consume(nodeQueueOf(ids[i]!), (m) => {
          if (m === null) return;
          fleet.onTaken(m.fields.routingKey, String(m.properties.messageId), ch);
          ch.ack(m);
        });
    }),
  );
  return fleet;
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

/** The broker's share alone, on the enrolled inboxes of the online fleet: publish each declaration confirmed, take it, publish a report. */
async function baseline(url: string, ids: readonly string[], fleet: Fleet): Promise<number> {
  const c = await amqp.connect(url);
  c.on('error', (e: Error) => console.error(`bench/fleet: baseline connection: ${e.message}`));
  const ch = await c.createConfirmChannel();
  await ch.assertQueue('bench.reports', { durable: true, arguments: { 'x-queue-type': 'quorum' } });
  const t0 = performance.now();
  let reported = 0;
  fleet.onTaken = (node, _id, dch) => {
    dch.sendToQueue('bench.reports', reportOf(node, 'x'.repeat(64)), { persistent: true });
    reported++;
  };
  for (let i = 0; i < ids.length; i += 500) {
    for (const node of ids.slice(i, i + 500))
      ch.publish(names.declarationsExchange, node, Buffer.alloc(700, 'x'), { persistent: true, mandatory: true, messageId: node });
    await ch.waitForConfirms();
  }
  while (reported < ids.length) {
    fleet.check();
    await sleep(20);
  }
  const seconds = (performance.now() - t0) / 1000;
  // A report still on its way to a queue being deleted crashes its channel on RabbitMQ 3.10.
  await fleet.settle();
  await ch.deleteQueue('bench.reports');
  await c.close();
  return seconds;
}

type Run = { send: number; published: number; relayAndDrain: number; converged: number; total: number; peaks: Peaks };

async function converge(b: BenchBroker, url: string, ids: readonly string[], fleet: Fleet): Promise<Run> {
  const transport = await createAmqpTransport({ url, logger, ...(inboxLanes === undefined ? {} : { inboxLanes }) });
  const store = createMemoryEventStore();
  const key = generateSigningKey();
  const watch = watchBroker(b, url);
  const t0 = performance.now();
  const sender = createBatchSender({ store, key });
  for (let i = 0; i < ids.length; i += 1000)
    await sender.sendMany(ids.slice(i, i + 1000).map((node) => ({ node, resources: [{ id: 'web', image: 'x' }] })));
  const tSent = performance.now();
  const published = new Set<string>();
  let tPublished = Number.NaN;
  const inner = transport.declarationPublisher();
  const publisher: DeclarationPublisher = {
    publish: async (d) => {
      await inner.publish(d);
      // A batch the relay retries publishes some declarations twice: count nodes, not publishes.
      if (published.add(d.node).size === ids.length && Number.isNaN(tPublished)) tPublished = performance.now();
    },
    close: () => inner.close(),
  };
  const relay = createRelay({ store, publisher, logger, batchSize: 500 });
  const ingest = createIngest({ store, source: transport.ingestSource(), logger, trustMissingUserId: true });
  await ingest.start();
  let taken = 0;
  fleet.onTaken = (node, digest, ch) => {
    taken++;
    ch.publish(names.meshExchange, names.reportKey, reportOf(node, digest), {
      persistent: true,
      messageId: randomBytes(16).toString('hex'),
      contentType: 'application/json',
    });
  };
  relay.start();
  let lastLine = performance.now();
  while (taken < ids.length) {
    fleet.check();
    await sleep(50);
    if (performance.now() - lastLine > 10_000) {
      lastLine = performance.now();
      process.stderr.write(`bench/fleet: ${published.size} published, ${taken} taken of ${ids.length}\n`);
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
  await transport.close();
  return {
    send: (tSent - t0) / 1000,
    published: (tPublished - tSent) / 1000,
    relayAndDrain: (tDrained - tSent) / 1000,
    converged: (tDone - tDrained) / 1000,
    total: (tDone - t0) / 1000,
    peaks,
  };
}

async function main(): Promise<void> {
  process.stderr.write(`bench/fleet: starting the broker…\n`);
  const b = (broker = await openBenchBroker('fleet', nodes));
  process.stderr.write(`bench/fleet: on ${b.describe}\n`);
  const vhost = await newVhost(b);
  const url = `${b.amqpBase}/${seg(vhost)}`;
  const ids = Array.from({ length: nodes }, (_, i) => `f${String(i).padStart(6, '0')}`);
  process.stderr.write(`bench/fleet: enrolling ${nodes} nodes (their inboxes, ${enrollChannels} channels)…\n`);
  const enrollWatch = watchBroker(b, url);
  const enrolled = await enroll(url, ids);
  const enrollPeaks = await enrollWatch.stop();
  process.stderr.write(`bench/fleet: ${nodes} nodes coming online (a consumer each)…\n`);
  const tOnline = performance.now();
  const fleet = await bringOnline(url, ids);
  const online = (performance.now() - tOnline) / 1000;
  process.stderr.write(`bench/fleet: baseline, ${nodes} nodes…\n`);
  const baseWatch = watchBroker(b, url);
  const base = await baseline(url, ids, fleet);
  const basePeaks = await baseWatch.stop();
  process.stderr.write(`bench/fleet: Converge, ${nodes} nodes…\n`);
  const run = await converge(b, url, ids, fleet);
  await fleet.close();
  const { describe, own } = b;
  const cleanSeconds = await cleanUp();
  const phases = { enrolled, enrollPeaks, online, base, basePeaks, run };
  writeReport(
    phases,
    describe,
    own
      ? `The broker, with its ${nodes} inboxes, was stopped and removed in ${cleanSeconds.toFixed(1)} s.`
      : `Deleting the vhost with its ${nodes} inboxes took ${cleanSeconds.toFixed(1)} s.`,
  );
}

type Phases = { enrolled: number; enrollPeaks: Peaks; online: number; base: number; basePeaks: Peaks; run: Run };

function writeReport(p: Phases, describe: string, cleanNote: string): void {
  const { run } = p;
  const probes = (k: Peaks): string =>
    `${k.probeFailures} of ${k.probes + k.probeFailures} failed, slowest answered in ${Math.round(k.probeMaxMs)} ms`;
  const report = createBenchReport(
    'A fleet through the broker',
    `${nodes} nodes in a vhost of the bench's own on ${describe}: enrolled first (inboxes declared ahead of need) and brought online (a consumer on each inbox, prefetch 1, as a node consumes it, on ${drainers} connections of ${drainChannels} channels), both timed apart; then from the first send: bulk send (memory store), relay, each node taking its declaration and publishing its report, ingest, all caught up. Baseline: bare amqplib doing the broker's share (publish confirmed in windows of 500, take, report) to the same online fleet.`,
  );
  report.row({
    name: 'first send to all converged',
    unit: 's',
    better: 'lower',
    converge: run.total,
    baseline: p.base,
    ...(nodes >= 100_000 ? { goal: { atMost: 300 } } : {}),
    notes: 'goal at 100,000 nodes: 5 minutes',
    headline: true,
  });
  report.row({ name: 'bulk send (recorded in the store)', unit: 's', better: 'lower', converge: run.send });
  report.row({ name: 'relay: all declarations published (confirmed)', unit: 's', better: 'lower', converge: run.published });
  report.row({ name: 'relay: all declarations taken by their nodes', unit: 's', better: 'lower', converge: run.relayAndDrain });
  report.row({ name: 'last declaration taken to all caught up (ingest)', unit: 's', better: 'lower', converge: run.converged });
  report.row({
    name: `enrolment ahead of need: ${nodes} inboxes declared and bound (${enrollChannels} channels)`,
    unit: 's',
    better: 'lower',
    converge: p.enrolled,
    notes: `${Math.round(nodes / p.enrolled)} inboxes/s; probe handshakes ${probes(p.enrollPeaks)}; peak open files ${p.enrollPeaks.fd} (fd_used ${p.enrollPeaks.fdUsed}), memory ${mib(Math.max(p.enrollPeaks.mem, p.enrollPeaks.rss))} MiB`,
  });
  report.row({ name: `${nodes} nodes online: a consumer on each inbox`, unit: 's', better: 'lower', converge: p.online });
  report.row({
    name: 'broker peak open files',
    unit: 'fds',
    better: 'lower',
    converge: run.peaks.fd,
    baseline: p.basePeaks.fd,
    notes: `the broker's own count (fd_used) peaked at ${run.peaks.fdUsed}, baseline ${p.basePeaks.fdUsed}, limit ${run.peaks.fdLimit}`,
  });
  // With the broker's statistics off (BENCH_BROKER_STATS=off) the management API reports no node
  // figures: those rows are left out rather than shown as zero.
  if (run.peaks.mem > 0) {
    report.row({
      name: 'broker peak memory (mem_used)',
      unit: 'MiB',
      better: 'lower',
      converge: mib(run.peaks.mem),
      baseline: mib(p.basePeaks.mem),
    });
    report.row({
      name: 'broker peak Erlang processes (proc_used)',
      unit: 'processes',
      better: 'lower',
      converge: run.peaks.proc,
      baseline: p.basePeaks.proc,
    });
  }
  if (run.peaks.rss > 0) {
    report.row({
      name: 'broker peak resident memory (/proc VmRSS)',
      unit: 'MiB',
      better: 'lower',
      converge: mib(run.peaks.rss),
      baseline: mib(p.basePeaks.rss),
      notes: `during enrolment ${mib(p.enrollPeaks.rss)} MiB`,
    });
  }
  report.row({
    name: 'probe handshakes failed from the first send to all converged',
    unit: 'connections',
    better: 'lower',
    converge: run.peaks.probeFailures,
    baseline: p.basePeaks.probeFailures,
    goal: { atMost: 0 },
    notes: `Converge: ${probes(run.peaks)}; baseline: ${probes(p.basePeaks)}`,
  });
  report.note(cleanNote);
  report.end();
}

const mib = (bytes: number): number => Math.round(bytes / 1024 / 1024);

main().catch(async (e: unknown) => {
  await cleanUp();
  console.error(e);
  process.exit(1);
});
