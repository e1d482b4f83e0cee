import { readFileSync, readlinkSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';
import type { Worker } from 'node:worker_threads';
import type { InboundKind } from '../../src/transport/brokerNames.ts';
import type { DeclarationPublisher } from '../../src/transport/port.ts';
import type { InProcessBroker } from '../../src/transport/inProcess.ts';
import { startThread } from '../../src/store/startThread.ts';

// A simulated fleet in a worker thread (fleetThread.ts), wired to an engine on this thread: the
// engine's relay publishes into `publisher` (declarations are posted to the thread, a batch a
// turn), and what the nodes publish comes back as messages on the engine's in-process broker,
// sent by the node itself (user id = node, as RabbitMQ would validate it).

export type FleetSettings = Readonly<{
  nodes: readonly string[];
  applyMs: number;
  publicKeyPem: string;
  /**
   * How much lower than the engine's thread the fleet's runs (nice, Linux; 0: the same). A real
   * fleet runs on machines of its own; on two shared cores a fleet at the engine's priority takes
   * its core from the engine's thread whenever both are ready.
   */
  nice?: number;
  /** Check every n-th declaration's signature (default 1: every one); see fleetThread.ts. */
  verifyEvery?: number;
}>;

export type FleetIn =
  Readonly<{ kind: 'declarations'; declarations: readonly Readonly<{ node: string; body: Uint8Array }>[] }> | Readonly<{ kind: 'stop' }>;

type FleetMessage = Readonly<{ kind: InboundKind; body: Uint8Array; messageId: string | null; userId: string | null }>;

export type FleetOut =
  | Readonly<{ kind: 'ready'; tid: number }>
  | Readonly<{ kind: 'stopped' }>
  | Readonly<{ kind: 'published'; messages: readonly FleetMessage[] }>;

export type RemoteFleet = Readonly<{
  publisher: DeclarationPublisher;
  /** The thread's own CPU time so far (ms), from /proc: what the fleet cost, apart from the engine's thread. */
  cpuMs: () => number;
  stop: () => Promise<void>;
}>;

/** The calling thread's Linux thread id (/proc/thread-self names it; a sync read runs on the calling thread). */
export const ownThreadId = (): number => Number(readlinkSync('/proc/thread-self').split('/').pop());

/** CPU time (user + system, ms) of one thread of this process, by its Linux thread id. */
export function threadCpuMs(tid: number): number {
  const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces, inside parentheses): utime is the 14th, stime the 15th.
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
}

export async function startRemoteFleet(broker: InProcessBroker, settings: FleetSettings): Promise<RemoteFleet> {
  const worker: Worker = startThread(new URL('./remoteFleet.ts', import.meta.url).href, 'fleetThread', {
    workerData: settings,
  });
  let pending: { node: string; body: Uint8Array }[] = [];
  let scheduled = false;
  let onStopped: (() => void) | null = null;
  // What the nodes published, handed to the engine's broker at most `perTurn` a turn: a socket
  // hands a consumer what one read brought, not a whole backlog, and the in-process broker
  // delivers all it holds in one turn.
  const perTurn = 256;
  let inbound: FleetMessage[] = [];
  let next = 0;
  let injecting = false;
  const inject = (): void => {
    const end = Math.min(inbound.length, next + perTurn);
    for (; next < end; next++) {
      const x = inbound[next]!;
      broker.inject(x.kind, Buffer.from(x.body.buffer, x.body.byteOffset, x.body.byteLength), { messageId: x.messageId, userId: x.userId });
    }
    if (next < inbound.length) {
      setImmediate(inject);
      return;
    }
    inbound = [];
    next = 0;
    injecting = false;
  };
  const tid = await new Promise<number>((resolve, reject) => {
    worker.once('error', reject);
    worker.on('message', (m: FleetOut) => {
      if (m.kind === 'ready') resolve(m.tid);
      else if (m.kind === 'stopped') onStopped?.();
      else {
        inbound.push(...m.messages);
        if (!injecting) {
          injecting = true;
          setImmediate(inject);
        }
      }
    });
  });
  if (settings.nice !== undefined && settings.nice !== 0) setPriority(tid, Math.min(19, getPriority() + settings.nice));
  return {
    publisher: {
      async publish(d) {
        if (d.fence !== undefined && !d.fence())
          throw new Error(`declaration ${d.digest} not published: the relay lease is past its bound`);
        pending.push({ node: d.node, body: d.body });
        if (scheduled) return;
        scheduled = true;
        setImmediate(() => {
          scheduled = false;
          const declarations = pending;
          pending = [];
          worker.postMessage({ kind: 'declarations', declarations } satisfies FleetIn);
        });
      },
      async close() {},
    },
    cpuMs: () => threadCpuMs(tid),
    async stop() {
      await new Promise<void>((resolve) => {
        onStopped = resolve;
        worker.postMessage({ kind: 'stop' } satisfies FleetIn);
      });
      await worker.terminate();
    },
  };
}
