import type { Logger } from 'pino';
import { sleep } from '../retry.ts';
import type { EventStore, LeaseHold } from './port.ts';

// Playing a role that one process at a time may play on a store (EventStore.acquireLease): the
// relay's `relay`, the rollout driver's `rollouts`. One loop for both: ask the store for the
// lease (waiting while another engine holds it), run the role until the lease is lost or the
// caller stops, give the lease up, and ask again. A failed ask is logged and tried again a
// second later. A store with no lease (memory, SQLite: one engine's) runs the role at once.
// A role that throws (its store failed a read, say) is logged, gives the lease up and plays
// again after a pause that doubles with each failure in a row (up to 30 pauses' worth; a play
// that ran that long before it threw counts from one again): the engine keeps serving, so a role
// that stopped for good would go unnoticed.
//
// Losing the lease ends the role here, but another engine may have taken it over already (a
// holder frozen past its bound learns of the loss only once it runs again): the roles built on it
// check the lease before what must not be done twice (the relay: `hold.valid()` before each
// publish, `hold.current()` before a batch counts as published) or guard every write by an expected
// revision (the driver).

export type WhileLeasedOptions = Readonly<{
  store: Pick<EventStore, 'acquireLease'>;
  /** The lease's name in the store. */
  name: string;
  /** Stop: ends the role if running, or the wait for the lease, and resolves once the lease is given up. */
  signal: AbortSignal;
  logger: Pick<Logger, 'info' | 'warn' | 'error'>;
  /** Logged when the lease is taken, and when it is lost (not when the caller stops). */
  taken: string;
  lost: string;
  /** How long to wait after the store failed to answer the ask, or the role threw (ms; default 1 s). */
  retryMs?: number;
  /**
   * The role, played while the lease is held: it should end soon after `held` aborts (the lease
   * was lost or the caller stopped). If it throws, the lease is given up, the error logged, and
   * the role played again after a pause.
   */
  run: (held: AbortSignal, hold?: LeaseHold) => Promise<void>;
}>;

/** Resolves once `signal` aborted and the lease (if one was held) was given up. */
export async function whileLeased(options: WhileLeasedOptions): Promise<void> {
  const { store, name, signal, logger } = options;
  const retryMs = options.retryMs ?? 1_000;
  let failures = 0;
  /** The longest pause; a play that ran at least this long before it threw starts the count again. */
  const longest = retryMs * 30;
  /** Play the role once; false (after the pause) if it threw. */
  const play = async (held: AbortSignal, hold?: LeaseHold): Promise<boolean> => {
    const started = performance.now();
    try {
      await options.run(held, hold);
      failures = 0;
      return true;
    } catch (err) {
      // Failures in a row: a role runs until stopped, so a play that ran well for a while is a
      // new failure, not the next of the last ones (those would pause it the longest for good).
      if (performance.now() - started >= longest) failures = 0;
      failures++;
      logger.error({ err: (err as Error).message, failures }, `the ${name} role failed; playing it again after a pause`);
      return false;
    }
  };
  const pause = (): Promise<void> => sleep(Math.min(longest, retryMs * 2 ** Math.max(0, failures - 1)), signal);
  const acquire = store.acquireLease?.bind(store);
  if (acquire === undefined) {
    // One engine's store: the role ends only when the caller stops, or by throwing.
    while (!(await play(signal)) && !signal.aborted) await pause();
    return;
  }
  while (!signal.aborted) {
    const hold = await acquire(name, signal).catch((err: unknown) => {
      logger.warn({ err: (err as Error).message }, `cannot ask the store for the ${name} lease; trying again`);
      return null;
    });
    if (hold === null) {
      await sleep(retryMs, signal);
      continue;
    }
    logger.info({}, options.taken);
    const held = new AbortController();
    let lost = false;
    const onAbort = (): void => held.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    if (signal.aborted) held.abort();
    void hold.lost.then(() => {
      lost = true;
      held.abort();
    });
    let ok: boolean;
    try {
      ok = await play(held.signal, hold);
    } finally {
      signal.removeEventListener('abort', onAbort);
      if (lost) logger.warn({}, options.lost);
      await hold.release();
    }
    if (!ok) await pause();
  }
}
