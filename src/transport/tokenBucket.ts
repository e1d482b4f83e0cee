import { sleep } from '../retry.ts';

// A token bucket for work the broker must not get in a burst (declaring node inboxes): `take`
// resolves once a token is free, in the order the takes were made. Tokens refill at
// `ratePerSecond` up to `burst`, so a quiet spell allows at most `burst` at once.

export type TokenBucketOptions = Readonly<{
  ratePerSecond: number;
  /** Tokens held at most (default: one second's worth). */
  burst?: number;
  /** For tests: a clock in ms and a sleep. */
  now?: () => number;
  wait?: (ms: number, signal?: AbortSignal) => Promise<void>;
}>;

export type TokenBucket = Readonly<{
  /** Resolves when a token is taken; at once (without one) if `signal` aborts. */
  take: (signal?: AbortSignal) => Promise<void>;
}>;

export function createTokenBucket(options: TokenBucketOptions): TokenBucket {
  const rate = options.ratePerSecond;
  const burst = options.burst ?? Math.max(1, Math.round(rate));
  if (!(rate > 0 && Number.isFinite(rate))) throw new RangeError(`token bucket rate must be a positive number, got ${rate}`);
  if (!(burst >= 1)) throw new RangeError(`token bucket burst must be at least 1, got ${burst}`);
  const now = options.now ?? (() => performance.now());
  const wait = options.wait ?? sleep;
  let tokens = burst;
  let at = now();
  /** Takes one after another, so the bucket is fair and its arithmetic needs no lock. */
  let line: Promise<void> = Promise.resolve();
  const takeOne = async (signal?: AbortSignal): Promise<void> => {
    for (;;) {
      if (signal?.aborted === true) return;
      const t = now();
      tokens = Math.min(burst, tokens + ((t - at) * rate) / 1000);
      at = t;
      if (tokens >= 1) {
        tokens -= 1;
        return;
      }
      await wait(Math.ceil(((1 - tokens) * 1000) / rate), signal);
    }
  };
  return {
    take: (signal) => {
      const next = line.then(() => takeOne(signal));
      line = next;
      return next;
    },
  };
}
