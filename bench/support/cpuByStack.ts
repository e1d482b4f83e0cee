import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';

// Whose CPU is it: V8's sampling profiler on this thread, each sample counted to a share when a
// frame of its stack comes from one of that share's files. A function that resumes after an
// await is sampled under the microtask queue with its own frame on top, so an async path is
// counted while its own code (or what it calls) runs, and not while it waits.

export type CpuShares = Readonly<{
  /** Sampled time of the thread (ms), idle excluded. */
  busyMs: number;
  /** Per share: sampled time whose stack holds a frame from a file whose URL contains one of its paths (ms). */
  ms: Readonly<Record<string, number>>;
}>;

type Node = { id: number; callFrame: { url: string; functionName?: string }; children?: number[] };
/** V8's profile: `startTime` and the samples' times (its start plus the deltas so far) in µs of the monotonic clock. */
export type Profile = { nodes: Node[]; samples: number[]; timeDeltas: number[]; startTime: number };

export async function startCpuShares(
  shares: Readonly<Record<string, readonly string[]>>,
  intervalUs = 1_000,
  /** Also write the whole profile here (a .cpuprofile Chrome's DevTools opens), to see more than the shares. */
  savePath: string | null = null,
): Promise<{ stop: () => Promise<CpuShares & { profile: Profile }> }> {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: intervalUs });
  await session.post('Profiler.start');
  return {
    async stop() {
      const { profile } = (await session.post('Profiler.stop')) as unknown as { profile: Profile };
      session.disconnect();
      if (savePath !== null) writeFileSync(savePath, JSON.stringify(profile));
      return { ...attribute(profile, shares), profile };
    },
  };
}

function attribute(profile: Profile, shares: Readonly<Record<string, readonly string[]>>): CpuShares {
  const names = Object.keys(shares);
  const parent = new Map<number, number>();
  const byId = new Map<number, Node>();
  for (const n of profile.nodes) {
    byId.set(n.id, n);
    for (const c of n.children ?? []) parent.set(c, n.id);
  }
  // Per node: which shares its stack (itself and its callers) belongs to, as a bit set.
  const memo = new Map<number, number>();
  const maskOf = (id: number): number => {
    const known = memo.get(id);
    if (known !== undefined) return known;
    const url = byId.get(id)?.callFrame.url ?? '';
    let mask = 0;
    names.forEach((name, i) => {
      if (shares[name]!.some((f) => url.includes(f))) mask |= 1 << i;
    });
    const up = parent.get(id);
    mask |= up === undefined ? 0 : maskOf(up);
    memo.set(id, mask);
    return mask;
  };
  const ms: Record<string, number> = Object.fromEntries(names.map((n) => [n, 0]));
  let busyUs = 0;
  profile.samples.forEach((id, i) => {
    const us = profile.timeDeltas[i + 1] ?? 0;
    if (byId.get(id)?.callFrame.functionName === '(idle)') return;
    busyUs += us;
    const mask = maskOf(id);
    names.forEach((n, j) => {
      if ((mask & (1 << j)) !== 0) ms[n]! += us / 1000;
    });
  });
  return { busyMs: busyUs / 1000, ms };
}
