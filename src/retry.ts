// Retry with backoff, one way for the whole engine: the store's subscriptions, the ingest's
// appends and dead-letters, and supervised broker channels all wait the same doubling delay,
// jittered where many processes retry at once, and stop waiting the moment they are stopped.
// It sits at the bottom of the layers (eslint/layers.js) and imports nothing.

export type BackoffOptions = Readonly<{
  /** The first delay. */
  minMs: number;
  /** No delay is ever longer, jitter included. */
  maxMs: number;
  /**
   * Spread each delay uniformly over ±this fraction of it (0 ≤ jitter ≤ 1; default 0). Wide
   * jitter keeps a fleet that lost the same broker or store at once from retrying in step.
   */
  jitter?: number;
  /** For tests: a source of numbers in [0, 1). */
  random?: () => number;
}>;

export type Backoff = Readonly<{
  /** The delay before the next attempt: minMs, then doubling up to maxMs, each jittered. */
  next: () => number;
  /** Back to minMs, after an attempt that succeeded (a supervisor that loops forever). */
  reset: () => void;
}>;

export function createBackoff(options: BackoffOptions): Backoff {
  const { minMs, maxMs } = options;
  const jitter = options.jitter ?? 0;
  const random = options.random ?? Math.random;
  if (!(minMs >= 0 && maxMs >= minMs)) throw new RangeError(`backoff needs 0 ≤ minMs ≤ maxMs, got ${minMs} and ${maxMs}`);
  if (!(jitter >= 0 && jitter <= 1)) throw new RangeError(`backoff jitter must be within [0, 1], got ${jitter}`);
  let base = minMs;
  return {
    next: () => {
      const spread = 1 - jitter + 2 * jitter * random();
      const delay = Math.min(maxMs, Math.round(base * spread));
      base = Math.min(maxMs, base * 2);
      return delay;
    },
    reset: () => {
      base = minMs;
    },
  };
}

/** Wait `ms`, or less if `signal` aborts first (so stop() never waits out a delay). Never rejects. */
export const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise<void>((resolve) => {
    if (signal?.aborted === true) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });

/**
 * Time for a loop that waits: monotonic ms and a sleep that ends early on abort. The real one by
 * default; a test hands in a virtual one to live through a minute of backoff in no real time.
 */
export type Clock = Readonly<{
  now: () => number;
  sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
}>;

export const realClock: Clock = { now: () => performance.now(), sleep: (ms, signal) => sleep(ms, signal) };

export type RetryOptions = BackoffOptions &
  Readonly<{
    /** Stop retrying (and stop waiting) when this aborts. */
    signal: AbortSignal;
    /** How the delays are waited (default: real timers). */
    sleep?: Clock['sleep'];
    /**
     * Told of each failure before the wait; `true` retries, `false` gives up (an error no retry
     * can fix, or a caller that no longer needs the result). Without it every failure retries.
     */
    onError?: (err: unknown, attempt: number) => boolean;
  }>;

export type RetryResult<T> =
  | Readonly<{ ok: true; value: T }>
  /** `error` is the last failure, or undefined when stopped before any attempt failed. */
  | Readonly<{ ok: false; error: unknown }>;

/** Call `fn` until it resolves, waiting a backoff delay after each failure; ends early when stopped or told to give up. */
export async function retry<T>(fn: () => Promise<T>, options: RetryOptions): Promise<RetryResult<T>> {
  const { signal, onError } = options;
  const wait = options.sleep ?? sleep;
  const delays = createBackoff(options);
  let error: unknown = undefined;
  for (let attempt = 1; !signal.aborted; attempt++) {
    try {
      return { ok: true, value: await fn() };
    } catch (err) {
      error = err;
      if (onError?.(err, attempt) === false || signal.aborted) break;
      await wait(delays.next(), signal);
    }
  }
  return { ok: false, error };
}

/**
 * `p`, or its caller let go once `signal` aborts (rejecting with the signal's reason): for work
 * that cannot itself be stopped, such as a request on another thread, whose answer is then unused.
 */
export function unlessAborted<T>(p: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return p;
  if (signal.aborted) {
    // Let go before it ends: its failure, when it comes, is nobody's to handle.
    p.catch(() => undefined);
    return Promise.reject(signal.reason as Error);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
