import type { Clock } from '../../src/retry.ts';

// A Clock (src/retry.ts) whose time moves only when the test says: sleeps wait for `advanceTo`,
// so a minute of backoff or of coalescing windows passes in no real time. Real I/O (an HTTP
// request) still takes real time; a test advances only once the code under test is asleep
// (`pending() > 0`), so virtual time never passes while an attempt is in flight.

type Timer = { at: number; seq: number; fire: () => void };

export type VirtualClock = Clock &
  Readonly<{
    /** Sleeps waiting now. */
    pending: () => number;
    /** When the earliest sleep ends (null: none waiting). */
    nextAt: () => number | null;
    /** Move time to `t` (never back), ending every sleep due by then in order. */
    advanceTo: (t: number) => void;
  }>;

export function createVirtualClock(start = 0): VirtualClock {
  let time = start;
  let seq = 0;
  let timers: Timer[] = [];
  const remove = (t: Timer): void => {
    timers = timers.filter((x) => x !== t);
  };
  return {
    now: () => time,
    sleep: (ms, signal) =>
      new Promise<void>((resolve) => {
        if (signal?.aborted === true) return resolve();
        const t: Timer = {
          at: time + Math.max(0, ms),
          seq: seq++,
          fire: () => {
            signal?.removeEventListener('abort', onAbort);
            resolve();
          },
        };
        const onAbort = (): void => {
          remove(t);
          resolve();
        };
        signal?.addEventListener('abort', onAbort, { once: true });
        timers.push(t);
      }),
    pending: () => timers.length,
    nextAt: () => (timers.length === 0 ? null : Math.min(...timers.map((t) => t.at))),
    advanceTo: (t) => {
      if (t < time) throw new RangeError(`virtual time moves forward only: ${t} < ${time}`);
      time = t;
      const due = timers.filter((x) => x.at <= t).sort((a, b) => a.at - b.at || a.seq - b.seq);
      timers = timers.filter((x) => x.at > t);
      for (const x of due) x.fire();
    },
  };
}
