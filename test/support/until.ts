// The one way a test waits for something to happen: poll until it is true, give up after a bound
// generous enough that only a bug reaches it (a test never asserts a wall-clock time).
import { setImmediate as nextTurn } from 'node:timers/promises';
import { sleep } from '../../src/retry.ts';

export type UntilOptions = Readonly<{
  /** Give up after this long, failing with `what` in the message. Default 60 s. */
  timeoutMs?: number;
  /** Poll this often; 0 polls on every turn of the event loop (setImmediate). Default 10 ms. */
  everyMs?: number;
}>;

// The one sleep (src/retry.ts), re-exported so tests that pause on purpose import it from here.
export { sleep } from '../../src/retry.ts';

/**
 * Resolves with the first truthy value `f` returns (so `const msg = await until('a message', () => queue.shift())`
 * hands the value over); rejects with "timed out after … waiting for <what>" when the bound passes first.
 * `options` may be just the timeout in ms.
 */
export async function until<T>(
  what: string,
  f: () => Promise<T | null | undefined | false> | T | null | undefined | false,
  options: UntilOptions | number = {},
): Promise<T> {
  const { timeoutMs = 60_000, everyMs = 10 } = typeof options === 'number' ? { timeoutMs: options } : options;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await (everyMs === 0 ? nextTurn() : sleep(everyMs));
  }
}
