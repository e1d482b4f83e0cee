// What one node inbox costs the broker: N inboxes of each candidate form are declared
// in a vhost of this bench's own — the way the relay declares them, one after another on one
// channel with the engine's assertTopology — then each gets one declaration-sized persistent
// message, and the broker's figures are read before and after: Erlang memory, Erlang processes,
// open file descriptors of the broker's OS process, bytes on disk under its data directory, and
// the declare rate. The baseline is today's inbox (a quorum queue); Converge's figure is the inbox
// `nodeTopology` declares now (classic v2, `x-max-length: 1`, `x-overflow: drop-head`). A third
// form, quorum with the same bound, is measured against the same baseline. The figures at
// 100,000 inboxes are extrapolations (per-inbox cost × 100,000), and say so.
//
// The broker is shared: the vhost is deleted after each form, on failure, and on SIGINT/SIGTERM,
// so no run leaves thousands of queues behind. Other people's work on the broker moves the
// before/after deltas; more inboxes (BENCH_INBOXES) make that noise smaller per inbox.
//   npm run bench -- inboxes          BENCH_INBOXES=2000 per form; BENCH_INBOX_PASSES=1
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import amqp from 'amqplib';
import type { Channel, ConfirmChannel } from 'amqplib';
import { names } from '../src/transport/brokerNames.ts';
import { assertTopology, nodeTopology } from '../src/transport/topology.ts';
import type { QueueArguments, Topology } from '../src/transport/topology.ts';
import { createBenchReport } from './support/report.ts';
import type { Row } from './support/report.ts';

const scale = Number(process.env['CONVERGE_BENCH_SCALE'] ?? 1);
const inboxes = Math.max(50, Math.round(Number(process.env['BENCH_INBOXES'] ?? 2000) * scale));
const passes = Math.max(1, Number(process.env['BENCH_INBOX_PASSES'] ?? 1));
const amqpBase = (process.env['CONVERGE_AMQP_URL'] ?? 'amqp://guest:guest@127.0.0.1:5672').replace(/\/+$/, '');
const fleet = 100_000;

type Form = Readonly<{ key: 'quorum' | 'design' | 'quorumBounded'; label: string; topology: (node: string) => Topology }>;

const withArguments =
  (args: QueueArguments) =>
  (node: string): Topology => {
    const t = nodeTopology(node);
    return { ...t, queues: t.queues.map((q) => ({ ...q, arguments: args })) };
  };

const forms: readonly Form[] = [
  { key: 'quorum', label: 'quorum (the inbox of earlier engines)', topology: withArguments({ 'x-queue-type': 'quorum' }) },
  { key: 'design', label: 'the inbox nodeTopology declares', topology: nodeTopology },
  {
    key: 'quorumBounded',
    label: 'quorum, x-max-length 1, drop-head',
    topology: withArguments({ 'x-queue-type': 'quorum', 'x-max-length': 1, 'x-overflow': 'drop-head' }),
  },
];

const ctl = (...args: string[]): string => execFileSync('rabbitmqctl', ['-q', ...args], { encoding: 'utf8', timeout: 600_000 });

/** The broker's own figures, read by `rabbitmqctl eval` (exact, where the management API's lag seconds). */
type Sample = { memory: number; processes: number; fds: number; disk: number };
let brokerPid = '';
let dataDir = '';
function sample(): Sample {
  const out = ctl(
    'eval',
    'io:format("~s ~w ~w ~s~n", [os:getpid(), erlang:memory(total), erlang:system_info(process_count), rabbit_mnesia:dir()]).',
  );
  const [pid, memory, processes, dir] = out.trim().split('\n')[0]!.split(' ');
  brokerPid = pid!;
  dataDir = dir!;
  const du = spawnSync('du', ['-sb', dataDir], { encoding: 'utf8' });
  return {
    memory: Number(memory),
    processes: Number(processes),
    fds: fdCount(),
    disk: Number(du.stdout.split('\t')[0] ?? NaN),
  };
}

const fdCount = (): number => readdirSync(`/proc/${brokerPid}/fd`).length;
/** The broker process's soft limit on open files. */
function fdLimit(): number {
  const line = readFileSync(`/proc/${brokerPid}/limits`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('Max open files'));
  return Number(line?.split(/\s+/)[3] ?? 1024);
}

/** The inboxes as the broker accounts them per queue (`rabbitmqctl list_queues`): how many, their memory and messages, summed. */
function inboxesOf(vhost: string): { count: number; memory: number; messages: number } {
  const rows = ctl('list_queues', '-p', vhost, '--no-table-headers', 'name', 'memory', 'messages')
    .trim()
    .split('\n')
    .map((l) => l.trim().split(/\s+/))
    .filter((r) => r[0]?.startsWith('node.'));
  return {
    count: rows.length,
    memory: rows.reduce((sum, r) => sum + Number(r[1] ?? 0), 0),
    messages: rows.reduce((sum, r) => sum + Number(r[2] ?? 0), 0),
  };
}

let liveVhost: string | null = null;
function removeVhost(): void {
  if (liveVhost === null) return;
  const v = liveVhost;
  liveVhost = null;
  try {
    ctl('delete_vhost', v);
  } catch (e) {
    console.error(`bench/inboxes: could not delete vhost ${v}; delete it by hand: rabbitmqctl delete_vhost ${v} (${(e as Error).message})`);
  }
}
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.on(signal, () => {
    removeVhost();
    process.exit(130);
  });

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The broker settles (idle queues hibernate) before a reading; a reading is the lower of two, a second apart. */
async function settled(): Promise<Sample> {
  await sleep(5_000);
  const a = sample();
  await sleep(1_000);
  const b = sample();
  return { memory: Math.min(a.memory, b.memory), processes: Math.min(a.processes, b.processes), fds: Math.min(a.fds, b.fds), disk: b.disk };
}

type Measured = {
  declarePerSecond: number;
  /** Per inbox, declared and empty. */
  memory: number;
  processes: number;
  fds: number;
  disk: number;
  /** Descriptors per inbox while a wave of inboxes is written (before they hibernate). */
  peakFds: number;
  /** Per inbox, holding one declaration. */
  memoryWithMessage: number;
  diskWithMessage: number;
  /** Per inbox, once its node took (and acknowledged) its declaration. */
  memoryTaken: number;
  fdsTaken: number;
  /** Inboxes that were given a message (fewer than all when the broker's descriptors are short). */
  holding: number;
  queueProcessMemoryEmpty: number;
  queueProcessMemoryTaken: number;
  /** The queue processes' own memory (rabbitmqctl list_queues memory), per inbox with its message. */
  queueProcessMemory: number;
  deleteSeconds: number;
};

async function measure(form: Form): Promise<Measured> {
  const vhost = `bench-inboxes-${randomBytes(4).toString('hex')}`;
  ctl('add_vhost', vhost);
  liveVhost = vhost;
  try {
    ctl('set_permissions', '-p', vhost, 'guest', '.*', '.*', '.*');
    const conn = await amqp.connect(`${amqpBase}/${encodeURIComponent(vhost)}`);
    try {
      const ch: Channel = await conn.createChannel();
      await ch.assertExchange(names.declarationsExchange, 'direct', { durable: true });
      const before = await settled();
      const nodes = Array.from({ length: inboxes }, (_, i) => `bench-${String(i).padStart(6, '0')}`);
      const t0 = performance.now();
      // As the relay does: one channel, one inbox after another.
      for (const node of nodes) await assertTopology(ch, form.topology(node));
      const declareSeconds = (performance.now() - t0) / 1000;
      const declared = await settled();
      const queueMemoryEmpty = inboxesOf(vhost).memory;
      const confirm: ConfirmChannel = await conn.createConfirmChannel();
      const body = randomBytes(512).toString('base64'); // ~700 bytes, a small declaration's Signed JSON
      // A classic v2 queue opens two files of its own when written and keeps them open while it
      // holds a message: 1,000 written at once took this broker (then limited to 1,024
      // descriptors) down while this bench was written. So only as many inboxes get a message as
      // half the broker's headroom allows, in waves, each waiting for the files to settle.
      const holding = Math.min(nodes.length, Math.floor((fdLimit() / 2 - fdCount()) / 3));
      if (holding < 50) throw new Error(`the broker has too few free file descriptors (limit ${fdLimit()}, open ${fdCount()})`);
      const wave = Math.min(100, Math.max(10, Math.floor(holding / 10)));
      let peakFds = 0;
      for (let i = 0; i < holding; i += wave) {
        const start = fdCount();
        const written = nodes.slice(i, Math.min(i + wave, holding));
        for (const node of written)
          confirm.publish(names.declarationsExchange, node, Buffer.from(body), {
            persistent: true,
            mandatory: true,
            contentType: 'application/json',
            messageId: randomBytes(32).toString('hex'),
            type: 'declaration',
          });
        await confirm.waitForConfirms();
        peakFds = Math.max(peakFds, (fdCount() - start) / written.length);
        await sleep(500);
      }
      const held = await settled();
      const { count, memory: queueMemory, messages } = inboxesOf(vhost);
      if (count !== inboxes || messages !== holding)
        throw new Error(`expected ${inboxes} inboxes, ${holding} of them holding a message; found ${count} holding ${messages}`);
      // The node takes its declaration (a connected node does at once): what an inbox costs then.
      for (const node of nodes.slice(0, holding)) {
        const m = await confirm.get(`node.${node}`, { noAck: false });
        if (m !== false) confirm.ack(m);
      }
      const taken = await settled();
      const queueMemoryTaken = inboxesOf(vhost).memory;
      await confirm.close();
      await ch.close();
      const per = (x: number): number => x / inboxes;
      // Holding figures: the empty inboxes' share (measured above) plus the held ones' own.
      const perHeld = (x: number, empty: number): number => (x - empty * inboxes) / holding + empty;
      const t1 = performance.now();
      await conn.close();
      removeVhost();
      const deleteSeconds = (performance.now() - t1) / 1000;
      return {
        declarePerSecond: inboxes / declareSeconds,
        memory: per(declared.memory - before.memory),
        processes: per(declared.processes - before.processes),
        fds: perHeld(held.fds - before.fds, per(declared.fds - before.fds)),
        peakFds,
        disk: per(declared.disk - before.disk),
        memoryWithMessage: perHeld(held.memory - before.memory, per(declared.memory - before.memory)),
        diskWithMessage: perHeld(held.disk - before.disk, per(declared.disk - before.disk)),
        queueProcessMemory: perHeld(queueMemory, per(queueMemoryEmpty)),
        queueProcessMemoryEmpty: per(queueMemoryEmpty),
        queueProcessMemoryTaken: per(queueMemoryTaken),
        memoryTaken: per(taken.memory - before.memory),
        fdsTaken: per(taken.fds - before.fds),
        holding,
        deleteSeconds,
      };
    } finally {
      await conn.close().catch(() => undefined);
    }
  } finally {
    removeVhost();
  }
}

const kib = (x: number): number => x / 1024;
/** Per inbox × the fleet, in `unit`s. */
const atFleet = (x: number, unit: number): number => (x * fleet) / unit;

/** A row of the report: a figure of one pass of `form` (default Converge's inbox), against the same figure of the quorum inbox. */
type FigureRow = Omit<Row, 'converge' | 'baseline'> & Readonly<{ of: (m: Measured) => number; form?: Form['key'] }>;

const rows: readonly FigureRow[] = [
  { name: 'declare rate, one channel', unit: 'inboxes/s', of: (m) => m.declarePerSecond },
  { name: 'Erlang memory per empty inbox', unit: 'KiB', better: 'lower', of: (m) => kib(m.memory) },
  { name: 'Erlang memory per inbox holding its declaration', unit: 'KiB', better: 'lower', of: (m) => kib(m.memoryWithMessage) },
  {
    name: 'Erlang memory per inbox once its node took the declaration',
    unit: 'KiB',
    better: 'lower',
    of: (m) => kib(m.memoryTaken),
  },
  {
    name: 'queue memory per empty inbox (list_queues memory)',
    unit: 'KiB',
    better: 'lower',
    of: (m) => kib(m.queueProcessMemoryEmpty),
    notes: 'per queue as the broker accounts it: unmoved by other work on a shared broker',
  },
  {
    name: 'queue memory per inbox holding its declaration (list_queues memory)',
    unit: 'KiB',
    better: 'lower',
    of: (m) => kib(m.queueProcessMemory),
  },
  {
    name: 'queue memory per inbox once its node took the declaration (list_queues memory)',
    unit: 'KiB',
    better: 'lower',
    of: (m) => kib(m.queueProcessMemoryTaken),
  },
  { name: 'Erlang processes per inbox', unit: 'processes', better: 'lower', of: (m) => m.processes },
  { name: 'open file descriptors per idle inbox holding its declaration', unit: 'fds', better: 'lower', of: (m) => m.fds },
  { name: 'open file descriptors per inbox once its node took the declaration', unit: 'fds', better: 'lower', of: (m) => m.fdsTaken },
  {
    name: 'open file descriptors per inbox being written (peak of a wave)',
    unit: 'fds',
    better: 'lower',
    of: (m) => m.peakFds,
    notes: 'a classic v2 inbox keeps them while it holds a message',
  },
  { name: 'disk per inbox holding its declaration', unit: 'KiB', better: 'lower', of: (m) => kib(m.diskWithMessage) },
  {
    name: 'Erlang memory at 100,000 inboxes, nodes connected (extrapolated)',
    unit: 'MiB',
    better: 'lower',
    of: (m) => atFleet(m.memoryTaken, 1024 * 1024),
    goal: { atMost: 2048 },
    notes: 'every inbox empty once its node took its declaration; a quorum inbox has a member on each of a cluster’s nodes',
  },
  {
    name: 'Erlang memory at 100,000 inboxes, each holding a declaration (extrapolated)',
    unit: 'MiB',
    better: 'lower',
    of: (m) => atFleet(m.memoryWithMessage, 1024 * 1024),
    notes: 'the worst case: a declaration sent to every node while none is connected',
  },
  {
    name: 'open file descriptors at 100,000 inboxes, each holding a declaration (extrapolated)',
    unit: 'fds',
    better: 'lower',
    of: (m) => atFleet(m.fds, 1),
    notes: 'the broker’s open-file limit must cover these and every connection',
  },
  {
    name: 'Erlang processes at 100,000 inboxes (extrapolated)',
    unit: 'processes',
    better: 'lower',
    of: (m) => atFleet(m.processes, 1),
    goal: { atMost: 1_048_576 / 2 },
    notes: 'the default Erlang process limit is 1,048,576',
  },
  { name: 'declaring 100,000 inboxes (extrapolated)', unit: 's', better: 'lower', of: (m) => fleet / m.declarePerSecond },
  {
    name: 'quorum bounded (max-length 1): Erlang memory per inbox holding its declaration',
    unit: 'KiB',
    better: 'lower',
    form: 'quorumBounded',
    of: (m) => kib(m.memoryWithMessage),
    notes: 'the other bounded candidate, against the same baseline',
  },
  { name: 'quorum bounded (max-length 1): declare rate', unit: 'inboxes/s', form: 'quorumBounded', of: (m) => m.declarePerSecond },
];

async function main(): Promise<void> {
  try {
    sample();
  } catch (e) {
    console.error(`bench/inboxes needs the local RabbitMQ and rabbitmqctl: ${(e as Error).message}`);
    process.exit(1);
  }
  const results: Record<Form['key'], Measured[]> = { quorum: [], design: [], quorumBounded: [] };
  for (let p = 0; p < passes; p++) {
    // Alternate the order so no form always meets the quieter broker.
    const order = p % 2 === 0 ? forms : [...forms].reverse();
    for (const form of order) {
      process.stderr.write(`bench/inboxes: pass ${p + 1}, ${inboxes} × ${form.label}…\n`);
      results[form.key].push(await measure(form));
    }
  }
  const report = createBenchReport(
    'Node inboxes on the broker',
    `What one node inbox costs RabbitMQ: ${inboxes} inboxes per form declared as the relay declares them, then one ~700-byte persistent declaration each; deltas of the broker's figures per inbox. Converge = the inbox \`nodeTopology\` declares (classic v2, \`x-max-length: 1\`, \`x-overflow: drop-head\`); baseline = the quorum inbox earlier engines declared. Rows "at 100,000" are extrapolations (per inbox × 100,000), not measurements.`,
  );
  // Every row is one figure of a pass (`of`), read from each pass of a form against the same figure of the quorum inbox.
  for (const { of, form = 'design', ...row } of rows) {
    report.row({ ...row, converge: results[form].map(of), baseline: results.quorum.map(of) });
  }
  const pick = <K extends keyof Measured>(key: Form['key'], k: K): number[] => results[key].map((x) => x[k]);
  report.note(
    `Deleting the bench vhost with its ${inboxes} inboxes took ${fmtList(pick('design', 'deleteSeconds'))} s (Converge's inbox), ${fmtList(pick('quorum', 'deleteSeconds'))} s (quorum), ${fmtList(pick('quorumBounded', 'deleteSeconds'))} s (quorum bounded). ` +
      `Inboxes given a declaration per form (bounded by the broker's free file descriptors): ${fmtCounts(pick('design', 'holding'))} (Converge's), ${fmtCounts(pick('quorum', 'holding'))} (quorum). Broker data directory ${dataDir}; the broker is shared, so deltas include whatever else ran on it meanwhile.`,
  );
  report.end();
}

const fmtList = (xs: number[]): string => xs.map((x) => x.toFixed(1)).join(', ');
const fmtCounts = (xs: number[]): string => xs.map((x) => String(x)).join(', ');

main().catch((e: unknown) => {
  removeVhost();
  console.error(e);
  process.exit(1);
});
