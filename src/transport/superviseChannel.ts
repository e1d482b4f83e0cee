import type { Channel } from 'amqplib';
import type { Logger } from 'pino';
import { createBackoff, sleep } from '../retry.ts';
import { guardChannel } from './amqpConnection.ts';

// A channel that comes back. Its owner says how to open it and what to do on each new one
// (prefetch, consume, listeners); when it closes — alone or with its connection — a new one
// is opened after a jittered backoff. Each incarnation is a fresh object, so anything tied to
// the old one (delivery tags) can tell it is stale by identity.

export type SupervisedChannel<C extends Channel> = Readonly<{
  /** The live channel, waiting for one while it is being re-opened. Rejects once stopped. */
  current: () => Promise<C>;
  stop: () => Promise<void>;
}>;

export type SuperviseOptions<C extends Channel> = Readonly<{
  open: () => Promise<C>;
  setup: (ch: C) => Promise<void>;
  logger: Logger;
  name: string;
  /** Stop when this aborts (the connection's `closed`), so a closed connection leaves no retry loop behind. */
  until?: AbortSignal;
  minBackoffMs?: number;
  maxBackoffMs?: number;
}>;

type Waiter<C> = { resolve: (c: C) => void; reject: (e: Error) => void };

export function superviseChannel<C extends Channel>(options: SuperviseOptions<C>): SupervisedChannel<C> {
  const { logger, name } = options;
  // Jittered: a broker restart closes every node's and engine's channels at the same instant.
  const delays = createBackoff({ minMs: options.minBackoffMs ?? 100, maxMs: options.maxBackoffMs ?? 5_000, jitter: 0.5 });
  const abort = new AbortController();
  let live: C | null = null;
  let waiters: Waiter<C>[] = [];
  options.until?.addEventListener('abort', () => void stop(), { once: true });

  async function loop(): Promise<void> {
    while (!abort.signal.aborted) {
      let ch: C | null = null;
      try {
        // While the connection is down, open() waits for it to come back: a stop must not.
        const opening = options.open();
        const opened = await untilAborted(opening, abort.signal);
        if (opened === null) {
          opening.then(
            (c) => c.close().catch(() => undefined),
            () => undefined,
          );
          break;
        }
        ch = guardChannel(opened, logger, name);
        const closed = new Promise<void>((resolve) => ch!.once('close', () => resolve()));
        await options.setup(ch);
        if (abort.signal.aborted) break;
        live = ch;
        for (const w of waiters.splice(0)) w.resolve(ch);
        delays.reset();
        await Promise.race([closed, new Promise<void>((r) => abort.signal.addEventListener('abort', () => r(), { once: true }))]);
        live = null;
        if (!abort.signal.aborted) logger.warn({ channel: name }, 'channel closed; re-opening');
      } catch (err) {
        live = null;
        if (abort.signal.aborted) break;
        logger.warn({ channel: name, err: (err as Error).message }, 'channel setup failed; retrying');
        ch?.close().catch(() => undefined);
      }
      await sleep(delays.next(), abort.signal);
    }
  }
  const done = loop();

  return {
    current: () => {
      if (abort.signal.aborted) return Promise.reject(new Error(`${name} channel stopped`));
      if (live !== null) return Promise.resolve(live);
      return new Promise<C>((resolve, reject) => waiters.push({ resolve, reject }));
    },
    stop,
  };

  async function stop(): Promise<void> {
    abort.abort();
    for (const w of waiters.splice(0)) w.reject(new Error(`${name} channel stopped`));
    waiters = [];
    const ch = live;
    live = null;
    if (ch !== null) await ch.close().catch(() => undefined);
    await done;
  }
}

/** `p`'s value, or null as soon as `signal` aborts (its value, if it comes, is the caller's to dispose of). */
function untilAborted<T>(p: Promise<T>, signal: AbortSignal): Promise<T | null> {
  if (signal.aborted) return Promise.resolve(null);
  return new Promise<T | null>((resolve, reject) => {
    const onAbort = (): void => resolve(null);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e as Error);
      },
    );
  });
}
