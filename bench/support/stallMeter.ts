import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

// Where an event-loop stall went. monitorEventLoopDelay says how long the loop was late, not why:
// on a shared 2-core machine the longest stalls were mostly the main thread waiting for a CPU,
// or asleep in a system call (an fsync), not the engine's own work. A timer ticks every few ms
// and reads the main thread's scheduler counters (Linux /proc/<pid>/task/<pid>/schedstat: ns on
// a CPU, ns runnable but waiting for one); the widest gap between two ticks is the longest stall,
// and the counters' moves across it split it into on CPU, waiting for a CPU, and the rest
// (blocked in the kernel, e.g. fsync or a page fault's I/O).

export type Stall = Readonly<{
  /** How much later than due the tick after the gap ran (ms). */
  ms: number;
  /** The main thread's time on a CPU during the gap (ms): the engine's own work. */
  cpuMs: number;
  /** Runnable but waiting for a CPU (ms): the machine's other work. */
  waitMs: number;
  /** Neither (ms): asleep in a system call, or idle before a timer. */
  blockedMs: number;
}>;

export type StallReport = Readonly<{
  longest: Stall;
  /** Over the whole measured stretch (ms). */
  total: Readonly<{ ms: number; cpuMs: number; waitMs: number }>;
}>;

/** `at`: performance.now(); `cpu`, `wait`: the main thread's counters so far (ms). */
export type Sample = { at: number; cpu: number; wait: number };

const schedstatPath = `/proc/${process.pid}/task/${process.pid}/schedstat`;

/** The main thread's counters now, or null where the kernel does not keep them. */
export function threadCounters(): Sample | null {
  let text: string;
  try {
    text = readFileSync(schedstatPath, 'latin1');
  } catch {
    return null;
  }
  const [cpu, wait] = text.split(' ').map(Number);
  if (cpu === undefined || wait === undefined || !Number.isFinite(cpu) || !Number.isFinite(wait)) return null;
  return { at: performance.now(), cpu: cpu / 1e6, wait: wait / 1e6 };
}

/** Start measuring; `stop` answers null where schedstat is not available (not Linux, or no schedstats). */
export function startStallMeter(tickMs = 5): { stop: () => StallReport | null } {
  const first = threadCounters();
  if (first === null) return { stop: () => null };
  let last = first;
  let longest: Stall = { ms: 0, cpuMs: 0, waitMs: 0, blockedMs: 0 };
  const tick = (): void => {
    const now = threadCounters();
    if (now === null) return;
    const late = now.at - last.at - tickMs;
    if (late > longest.ms) {
      const cpuMs = now.cpu - last.cpu;
      const waitMs = now.wait - last.wait;
      longest = { ms: late, cpuMs, waitMs, blockedMs: Math.max(0, now.at - last.at - cpuMs - waitMs - tickMs) };
    }
    last = now;
  };
  const timer = setInterval(tick, tickMs);
  return {
    stop: () => {
      clearInterval(timer);
      tick();
      return { longest, total: { ms: last.at - first.at, cpuMs: last.cpu - first.cpu, waitMs: last.wait - first.wait } };
    },
  };
}
