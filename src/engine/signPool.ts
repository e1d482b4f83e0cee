import type { Worker } from 'node:worker_threads';
import type { Resource, SigningKey } from '../core/declaration/index.ts';
import type { SignedDeclaration } from '../core/events/index.ts';
import { startThread } from '../store/startThread.ts';
import type { SignReply, SignRequest, SignThreadData } from './signThread.ts';

// The bulk sender's signing off the engine thread (docs/design.md "Sharing the event loop"):
// building, digesting and Ed25519-signing a declaration is most of a send's CPU, ~40 µs a node,
// and on the engine thread it took turns from the API, ingest and the projections. One thread
// (signThread.ts), started at the first send, holds the key, handed to it once at its start; it
// says when it has loaded (`ready`), and the sends before that are signed on the engine thread.
// Requests are answered in the order they were posted, so a batch queued behind the one being
// signed is signed next, while the engine thread appends the first (sendBatch.ts `ahead`).
//
// A thread that throws, exits or answers what was not asked fails every request it had, and the
// pool refuses every later one: the sender signs those on its own thread, as before. Nothing is
// appended before its signatures are in, so a failure loses no send and repeats none.

export type SignItem = Readonly<{ node: string; serial: number; resources: readonly Resource[] }>;

export type SignPool = Readonly<{
  /** The items' declarations, signed at `now`, in their order; rejects once the thread has failed, or if the pool is closed first. */
  sign: (now: Date, items: readonly SignItem[]) => Promise<SignedDeclaration[]>;
  /** Whether requests still go to the thread: false once it failed. */
  usable: () => boolean;
  /** Whether the thread has loaded: a request now is not kept waiting for its start. */
  ready: () => boolean;
  /** Start the thread (if it is not running) without asking it anything. */
  start: () => void;
  /** Stop the thread; requests not answered are rejected. A later request starts it again. */
  close: () => Promise<void>;
}>;

export type SignPoolOptions = Readonly<{
  key: SigningKey;
  /** Told once, when the thread fails (the sender then signs on its own thread). */
  onFailure?: (err: Error) => void;
  /**
   * How much lower than the engine's thread the signing thread runs (nice, Linux; default 10): on
   * two cores shared with the simulated fleet, at the same priority it took the turns the API and
   * the fleet waited for (docs/design.md "Sharing the event loop").
   */
  nice?: number;
  /** Starts the thread (tests start one that fails); default signThread.ts beside this file. */
  spawn?: (data: SignThreadData) => Worker;
}>;

/** The signing thread's nice above the engine's: it signs with the cores the others leave. */
export const defaultSignNice = 10;

type Pending = { count: number; resolve: (s: SignedDeclaration[]) => void; reject: (e: Error) => void };

const defaultSpawn = (data: SignThreadData): Worker => startThread(import.meta.url, 'signThread', { workerData: data });

export function createSignPool(options: SignPoolOptions): SignPool {
  const spawn = options.spawn ?? defaultSpawn;
  let worker: Worker | null = null;
  let ended: Error | null = null;
  let loaded = false;
  let ids = 0;
  const pending = new Map<number, Pending>();

  /** Reject every request waiting with `err` and forget the thread, for the caller to stop. */
  function drop(err: Error): Worker | null {
    for (const p of pending.values()) p.reject(err);
    pending.clear();
    const w = worker;
    worker = null;
    loaded = false;
    return w;
  }

  function fail(err: Error): void {
    if (ended !== null) return;
    ended = err;
    void drop(err)
      ?.terminate()
      .catch(() => undefined);
    options.onFailure?.(err);
  }

  function answer(m: SignReply): void {
    if (m === 'ready') {
      loaded = true;
      return;
    }
    const p = pending.get(m.id);
    const whole = m.digests?.length === p?.count && m.declarations?.length === p?.count && m.signatures?.length === p?.count;
    if (p === undefined || !whole) {
      fail(new Error(`the signing thread answered request ${String(m.id)} with what was not asked`));
      return;
    }
    pending.delete(m.id);
    if (pending.size === 0) worker?.unref();
    p.resolve(m.digests.map((digest, i) => ({ digest, declaration: m.declarations[i]!, signature: m.signatures[i]! })));
  }

  function started(): Worker {
    if (worker !== null) return worker;
    const w = spawn({ key: options.key, nice: options.nice ?? defaultSignNice });
    // Referenced only while a request waits: an idle thread, or one still loading, keeps no process alive.
    w.unref();
    w.on('message', (m: SignReply) => {
      if (worker === w) answer(m);
    });
    w.on('error', (err) => {
      if (worker === w) fail(err);
    });
    w.on('messageerror', (err) => {
      if (worker === w) fail(err);
    });
    // Closing stops a thread this pool no longer holds: its exit is no failure.
    w.on('exit', (code) => {
      if (worker === w) fail(new Error(`the signing thread exited (code ${code})`));
    });
    worker = w;
    return w;
  }

  return {
    sign: (now, items) => {
      if (ended !== null) return Promise.reject(ended);
      const specs: (readonly Resource[])[] = [];
      const index = new Map<readonly Resource[], number>();
      const spec = items.map((t) => {
        let i = index.get(t.resources);
        if (i === undefined) index.set(t.resources, (i = specs.push(t.resources) - 1));
        return i;
      });
      const id = ++ids;
      const request: SignRequest = {
        id,
        now: now.getTime(),
        specs,
        nodes: items.map((t) => t.node),
        serials: items.map((t) => t.serial),
        spec,
      };
      return new Promise<SignedDeclaration[]>((resolve, reject) => {
        const w = started();
        pending.set(id, { count: items.length, resolve, reject });
        w.ref();
        w.postMessage(request);
      });
    },
    usable: () => ended === null,
    ready: () => ended === null && loaded,
    start: () => {
      if (ended === null) started();
    },
    close: async () => {
      await drop(new Error('the signing pool was closed'))?.terminate();
    },
  };
}
