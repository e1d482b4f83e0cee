// The broker a heavy bench runs against: by default a one-node RabbitMQ of the bench's own
// (scripts/rabbitmq-cluster.sh through test/support/rabbitCluster.ts: its own folder, Erlang cookie,
// ports and management port), so filling it with inboxes cannot exhaust the system broker that
// every other client on the machine uses. CONVERGE_AMQP_URL (with CONVERGE_MANAGEMENT_URL) points
// the bench at an existing broker instead; then the bench refuses a run that broker's open-file
// limit cannot hold (docs/operations.md "Sizing the broker").
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import amqp from 'amqplib';
import { createManagementClient } from '../../src/brokerAdmin/managementClient.ts';
import type { ManagementClient } from '../../src/brokerAdmin/managementClient.ts';
import { startRabbitCluster } from '../../test/support/rabbitCluster.ts';

export type BenchBroker = Readonly<{
  /** `amqp://guest:guest@host:port`, no vhost. */
  amqpBase: string;
  admin: ManagementClient;
  /** What the bench ran against, for a report note. */
  describe: string;
  /** True for a broker the bench started: the bench's data goes with it, no vhost to delete. */
  own: boolean;
  /** Open files of the broker's VM right now (/proc), or null when it is not ours to read. */
  openFiles: () => number | null;
  /** Resident memory of the broker's VM right now in bytes (/proc), or null when it is not ours to read. */
  rss: () => number | null;
  /** Stops a broker of our own and removes its folder; nothing for an existing one. Idempotent. The bench
   * calls it at the end, on failure and on SIGINT/SIGTERM; if the bench dies first, the script's watchdog does. */
  close: () => Promise<void>;
}>;

/** Descriptors kept for everything that is not an inbox: connections, the broker's own files. */
const headroom = 8_000;

/** The hard open-file limit this process may give a child without CAP_SYS_RESOURCE. */
function hardFileLimit(): number {
  return Number(execFileSync('sh', ['-c', 'ulimit -Hn'], { encoding: 'utf8' }).trim());
}

/** `inboxes`: how many inboxes the run may make, to size (or check) the open-file limit. */
export async function openBenchBroker(name: string, inboxes: number): Promise<BenchBroker> {
  const external = process.env['CONVERGE_AMQP_URL'];
  // Management timeouts are long: a broker holding a fleet answers slowly.
  const timeoutMs = 5 * 60_000;
  if (external !== undefined && external !== '') {
    const managementUrl = process.env['CONVERGE_MANAGEMENT_URL'] ?? 'http://guest:guest@127.0.0.1:15672';
    const admin = createManagementClient({ managementUrl, timeoutMs });
    const r = await admin.request('GET', '/nodes?columns=fd_total').catch((e: unknown) => ({ status: 0, body: String(e) }));
    if (r.status !== 200) throw new Error(`bench/${name} needs RabbitMQ with its management API at ${admin.baseUrl}`);
    const limit = Math.min(...(r.body as { fd_total: number }[]).map((n) => n.fd_total));
    if (4 * inboxes + headroom > limit)
      throw new Error(
        `bench/${name}: ${inboxes} inboxes need an open-file limit of ${4 * inboxes + headroom} on ${admin.baseUrl}, it has ${limit}; unset CONVERGE_AMQP_URL to run against a broker of the bench's own`,
      );
    return {
      amqpBase: external.replace(/\/+$/, ''),
      admin,
      describe: `the existing broker at ${admin.baseUrl} (open-file limit ${limit})`,
      own: false,
      openFiles: () => null,
      rss: () => null,
      close: async () => undefined,
    };
  }
  const nofile = Number(process.env['BENCH_BROKER_NOFILE'] ?? Math.min(hardFileLimit(), 4 * inboxes + headroom));
  // The broker's file-handle cache counts two handles for every classic inbox that ever held a
  // message, though their files are closed once it is taken, and past its limit it stops accepting
  // connections; so its count gets the room the inboxes need, while the OS limit bounds the files
  // really open (docs/operations.md "Sizing the broker").
  const handles = Math.max(nofile, 4 * inboxes + headroom);
  const stats = brokerStats();
  // RabbitMQ 3.10's classic queues page their messages to disk once the broker's memory passes this
  // share of its watermark (default 0.5): a 100,000-inbox broker is there with nothing queued.
  const paging = process.env['BENCH_BROKER_PAGING_RATIO'];
  const pagingTerm = paging === undefined ? '' : `,{vm_memory_high_watermark_paging_ratio,${Number(paging)}}`;
  const advanced = `[{rabbit,[{file_handles_high_watermark,${handles}}${pagingTerm}]}${statsTerms[stats]}].`;
  const cluster = await startRabbitCluster({ nodes: 1, nofile, management: true, advanced });
  const node = cluster.nodes[0]!;
  // The VM writes its pid once it runs; the start above waits for that.
  const pid = readFileSync(join(node.dir, 'pid'), 'utf8').trim();
  const admin = createManagementClient({ managementUrl: `http://guest:guest@127.0.0.1:${node.managementPort}`, timeoutMs });
  let closed: Promise<void> | null = null;
  const close = (): Promise<void> => (closed ??= cluster.remove());
  return {
    amqpBase: `amqp://guest:guest@127.0.0.1:${node.port}`,
    admin,
    describe: `a one-node RabbitMQ 3.10 of the bench's own (open-file limit ${nofile}, file_handles_high_watermark ${handles}, management statistics ${statsSaid[stats]}${paging === undefined ? '' : `, paging ratio ${Number(paging)}`})`,
    own: true,
    openFiles: () => {
      try {
        return readdirSync(`/proc/${pid}/fd`).length;
      } catch {
        return null;
      }
    },
    rss: () => {
      try {
        const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
        return kb === undefined ? null : Number(kb) * 1024;
      } catch {
        return null;
      }
    },
    close,
  };
}

/**
 * What the management plugin collects on a broker of the bench's own (BENCH_BROKER_STATS): `on`,
 * RabbitMQ's default; `none`, no message rates (`rates_mode none`); `off`, no statistics at all
 * (`disable_metrics_collector`: /api/nodes answers nothing, so memory comes from /proc). At
 * 100,000 inboxes the default's statistics took about 3.7 GB (docs/operations.md "Sizing the broker").
 */
type BrokerStats = 'on' | 'none' | 'off';
function brokerStats(): BrokerStats {
  const v = process.env['BENCH_BROKER_STATS'] ?? 'on';
  if (v === 'on' || v === 'none' || v === 'off') return v;
  throw new Error(`BENCH_BROKER_STATS is on, none or off, not ${v}`);
}
const statsTerms: Record<BrokerStats, string> = {
  on: '',
  none: ',{rabbitmq_management,[{rates_mode,none}]}',
  off: ',{rabbitmq_management_agent,[{disable_metrics_collector,true}]}',
};
const statsSaid: Record<BrokerStats, string> = { on: 'on (the default)', none: 'without rates', off: 'off' };

export type BrokerPeaks = {
  /** Files open: the management API's fd_used, and the VM's /proc count when the broker is ours. */
  fd: number;
  /** The management API's fd_used (the broker's file-handle cache's count). */
  fdUsed: number;
  mem: number;
  /** The VM's resident memory (/proc) when the broker is ours, else 0; with statistics off, the only memory figure. */
  rss: number;
  proc: number;
  probes: number;
  probeFailures: number;
  /** The slowest probe handshake that succeeded, in ms. */
  probeMaxMs: number;
  fdLimit: number;
};

/** Samples the broker's figures (/api/nodes, and /proc when it is ours) and probes a new AMQP handshake every second until stopped. */
export function watchBroker(broker: BenchBroker, url: string): { stop: () => Promise<BrokerPeaks> } {
  const peaks: BrokerPeaks = { fd: 0, fdUsed: 0, mem: 0, rss: 0, proc: 0, probes: 0, probeFailures: 0, probeMaxMs: 0, fdLimit: 0 };
  let on = true;
  const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
  const loop = (async () => {
    while (on) {
      const r = await broker.admin.request('GET', '/nodes?columns=fd_used,fd_total,mem_used,proc_used').catch(() => null);
      // A node's figures are missing until its first stats round: skip it rather than take NaN.
      const rows = (r?.body as { fd_used?: number; fd_total?: number; mem_used?: number; proc_used?: number }[] | null) ?? [];
      for (const n of rows.filter((x): x is Required<typeof x> =>
        [x.fd_used, x.fd_total, x.mem_used, x.proc_used].every(Number.isFinite),
      )) {
        peaks.fdUsed = Math.max(peaks.fdUsed, n.fd_used);
        // Both counts read the VM's open files, at different moments: the peak is the larger.
        peaks.fd = Math.max(peaks.fd, n.fd_used);
        peaks.mem = Math.max(peaks.mem, n.mem_used);
        peaks.proc = Math.max(peaks.proc, n.proc_used);
        peaks.fdLimit = n.fd_total;
      }
      peaks.fd = Math.max(peaks.fd, broker.openFiles() ?? 0);
      peaks.rss = Math.max(peaks.rss, broker.rss() ?? 0);
      const t0 = performance.now();
      try {
        const c = await amqp.connect(url, { timeout: 10_000 });
        peaks.probeMaxMs = Math.max(peaks.probeMaxMs, performance.now() - t0);
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
