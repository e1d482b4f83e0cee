import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { Profile } from './cpuByStack.ts';
import { threadCounters } from './stallMeter.ts';

// Which code made the event loop's longest turns. A 1 ms interval timer runs once per loop
// iteration when the loop is busy, so the gap between two of its ticks is (at least) one turn;
// V8's profile samples carry timestamps on the same monotonic clock (µs), so the samples inside
// a gap say whose work it was: each counted to the outermost and the deepest frame from the
// project's own files (src/, projections/, bench/), or the V8 / Node frame at the top when none is.
// On a shared machine a turn's wall time is mostly waiting for a core, so turns are ranked by the
// main thread's own CPU time across the gap (stallMeter.ts reads it from the kernel): the work a
// turn holds the loop for, whatever the machine's load.

export type Turn = Readonly<{
  /** Wall time of the gap (ms). */
  ms: number;
  /** The main thread's CPU time in it (ms). */
  cpuMs: number;
  /** Sampled time inside the turn, by owner (file:function), most first (ms). */
  owners: readonly Readonly<{ owner: string; ms: number }>[];
}>;

export type TurnMeter = Readonly<{
  /**
   * Stop ticking: the loop's delay percentiles (ms, monitorEventLoopDelay, wall) and the CPU
   * time of its turns (ms: p99 and max over the gaps between ticks).
   */
  stop: () => Readonly<{ p50: number; p99: number; max: number; turns: number; cpuP99: number; cpuMax: number }>;
  /** The `top` longest gaps with their owners, from a profile taken over the same stretch. */
  attribute: (profile: Profile, top?: number) => readonly Turn[];
}>;

const nowUs = (): number => Number(process.hrtime.bigint() / 1000n);

export function startTurnMeter(keepOverMs = 5): TurnMeter {
  const gaps: { from: number; to: number; cpuMs: number }[] = [];
  const cpus: number[] = [];
  const delay = monitorEventLoopDelay({ resolution: 1 });
  delay.enable();
  let last = nowUs();
  let lastCpu = threadCounters()?.cpu ?? 0;
  const timer = setInterval(() => {
    const t = nowUs();
    const cpu = threadCounters()?.cpu ?? 0;
    cpus.push(cpu - lastCpu);
    if (cpu - lastCpu > keepOverMs) gaps.push({ from: last, to: t, cpuMs: cpu - lastCpu });
    last = t;
    lastCpu = cpu;
  }, 1);
  return {
    stop: () => {
      clearInterval(timer);
      delay.disable();
      const sorted = cpus.sort((a, b) => a - b);
      return {
        p50: delay.percentile(50) / 1e6,
        p99: delay.percentile(99) / 1e6,
        max: delay.max / 1e6,
        turns: sorted.length,
        cpuP99: sorted[Math.floor(sorted.length * 0.99)] ?? 0,
        cpuMax: sorted[sorted.length - 1] ?? 0,
      };
    },
    attribute: (profile, top = 10) => {
      const owner = ownersOf(profile);
      const times: number[] = [];
      let t = profile.startTime;
      for (const d of profile.timeDeltas) times.push((t += d));
      return [...gaps]
        .sort((a, b) => b.cpuMs - a.cpuMs)
        .slice(0, top)
        .map((g) => {
          const by = new Map<string, number>();
          profile.samples.forEach((id, i) => {
            const at = times[i]!;
            if (at < g.from || at > g.to) return;
            const us = profile.timeDeltas[i + 1] ?? 0;
            const o = owner(id);
            by.set(o, (by.get(o) ?? 0) + us / 1000);
          });
          const owners = [...by].map(([o, ms]) => ({ owner: o, ms })).sort((a, b) => b.ms - a.ms);
          return { ms: (g.to - g.from) / 1000, cpuMs: g.cpuMs, owners };
        });
    },
  };
}

const ours = /\/(src|projections|bench)\//;

const frameName = (url: string, fn: string): string =>
  `${/\/((?:src|projections|bench)\/.*)$/.exec(url)?.[1] ?? url}:${fn || '(anonymous)'}`;

/**
 * Per profile node: the outermost and the deepest frame of the project's on its stack (the loop
 * that took the turn, and where in it the time went), else its own name (V8's or Node's).
 */
function ownersOf(profile: Profile): (id: number) => string {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const memo = new Map<number, string>();
  return (id) => {
    const known = memo.get(id);
    if (known !== undefined) return known;
    const self = byId.get(id)?.callFrame;
    let deepest: string | null = null;
    let outermost: string | null = null;
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const f = byId.get(at)?.callFrame;
      if (f === undefined || !ours.test(f.url)) continue;
      outermost = frameName(f.url, f.functionName ?? '');
      deepest ??= outermost;
    }
    const found =
      deepest === null
        ? `${self?.functionName || '(anonymous)'} ${(self?.url ?? '').split('/').slice(-2).join('/')}`.trim()
        : outermost === deepest
          ? deepest
          : `${outermost} > ${deepest}`;
    memo.set(id, found);
    return found;
  };
}

/** One line a turn: its CPU and wall time and its largest owners. */
export const describeTurns = (turns: readonly Turn[]): string[] =>
  turns.map(
    (t) =>
      `${t.cpuMs.toFixed(1)} ms CPU (${t.ms.toFixed(0)} ms wall): ${t.owners
        .slice(0, 4)
        .map((o) => `${o.owner} ${o.ms.toFixed(1)}`)
        .join(', ')}`,
  );
