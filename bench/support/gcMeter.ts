import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { GCProfiler } from 'node:v8';
import { percentile } from './apiProbe.ts';

// The engine thread's garbage collector over a stretch of a bench, from V8's own record of each
// collection on this thread (v8.GCProfiler: its kind, its pause and every heap space's size before
// and after), so the fleet's and the writer's threads are not in it. A scavenge's pause grows with
// what survives it (copied within the young generation or promoted to the old), not with the
// garbage, so both are counted: survivors are the young generation's size after a scavenge,
// promoted bytes the old spaces' growth across it. What the young generation took between two
// collections is the bytes allocated there (large objects and pretenured ones go straight to
// the old spaces, and are counted only when a scavenge sees them grow).

export type GcFigures = Readonly<{
  scavenges: number;
  /** Pause of the scavenges (ms): total, p99 and longest. */
  scavengeMs: number;
  scavengeP99Ms: number;
  scavengeMaxMs: number;
  /** Every other collection (mark-compact, incremental marking steps, weak callbacks). */
  others: number;
  othersMs: number;
  othersMaxMs: number;
  /** Bytes allocated in the young generation. */
  youngAllocated: number;
  /** Bytes that survived a scavenge in the young generation, summed over scavenges. */
  survived: number;
  /** Bytes promoted to the old spaces by scavenges. */
  promoted: number;
}>;

type Space = Readonly<{ spaceName: string; spaceUsedSize: number }>;
type Stat = Readonly<{
  gcType: string;
  cost: number;
  beforeGC: Readonly<{ heapSpaceStatistics: readonly Space[] }>;
  afterGC: Readonly<{ heapSpaceStatistics: readonly Space[] }>;
}>;

const used = (spaces: readonly Space[], names: readonly string[]): number =>
  spaces.reduce((n, s) => (names.includes(s.spaceName) ? n + s.spaceUsedSize : n), 0);
const young = ['new_space', 'new_large_object_space'];
const old = ['old_space', 'large_object_space', 'code_space'];

export function figuresOf(stats: readonly Stat[]): GcFigures {
  const scavengePauses: number[] = [];
  const otherPauses: number[] = [];
  let youngAllocated = 0;
  let survived = 0;
  let promoted = 0;
  let youngAfter: number | null = null;
  for (const s of stats) {
    const before = used(s.beforeGC.heapSpaceStatistics, young);
    if (youngAfter !== null) youngAllocated += Math.max(0, before - youngAfter);
    youngAfter = used(s.afterGC.heapSpaceStatistics, young);
    if (s.gcType === 'Scavenge') {
      scavengePauses.push(s.cost / 1000);
      survived += youngAfter;
      promoted += Math.max(0, used(s.afterGC.heapSpaceStatistics, old) - used(s.beforeGC.heapSpaceStatistics, old));
    } else otherPauses.push(s.cost / 1000);
  }
  const sum = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0);
  return {
    scavenges: scavengePauses.length,
    scavengeMs: sum(scavengePauses),
    scavengeP99Ms: scavengePauses.length === 0 ? 0 : percentile(scavengePauses, 99),
    scavengeMaxMs: Math.max(0, ...scavengePauses),
    others: otherPauses.length,
    othersMs: sum(otherPauses),
    othersMaxMs: Math.max(0, ...otherPauses),
    youngAllocated,
    survived,
    promoted,
  };
}

/** Start recording this thread's collections; `stop` sums them. */
export function startGcMeter(): { stop: () => GcFigures } {
  const profiler = new GCProfiler();
  profiler.start();
  return {
    stop: () => figuresOf((profiler.stop()?.statistics ?? []) as unknown as readonly Stat[]),
  };
}

const mib = (b: number): string => (b / 2 ** 20).toFixed(0);
/** One line of figures, `nodes` the count the bytes are divided by. */
export function describeGc(g: GcFigures, nodes: number): string {
  return (
    `${g.scavenges} scavenges, ${g.scavengeMs.toFixed(0)} ms of pause (p99 ${g.scavengeP99Ms.toFixed(1)} ms, max ${g.scavengeMaxMs.toFixed(1)} ms); ` +
    `${g.others} other collections, ${g.othersMs.toFixed(0)} ms (max ${g.othersMaxMs.toFixed(1)} ms); ` +
    `young generation allocated ${mib(g.youngAllocated)} MiB (${(g.youngAllocated / nodes / 1024).toFixed(1)} KiB a node), ` +
    `survived scavenges ${mib(g.survived)} MiB, promoted ${mib(g.promoted)} MiB (${(g.promoted / nodes).toFixed(0)} B a node)`
  );
}

/**
 * V8's sampling heap profiler over a stretch (BENCH_HEAP_PROFILE): where this thread allocates,
 * written as a .heapprofile Chrome's DevTools opens. Collected objects are kept in it (the flags
 * below), since the question is what is allocated, not only what is live at the end; with
 * `survivors` those a scavenge collected are left out, leaving what outlived one: what the
 * scavenges copied and promoted.
 */
export async function startHeapSampling(path: string | null, survivors = false): Promise<{ stop: () => Promise<void> }> {
  if (path === null) return { stop: async () => {} };
  const session = new Session();
  session.connect();
  await session.post('HeapProfiler.startSampling', {
    samplingInterval: 32 * 1024,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: !survivors,
  });
  return {
    async stop() {
      const { profile } = await session.post('HeapProfiler.stopSampling');
      session.disconnect();
      writeFileSync(path, JSON.stringify(profile));
    },
  };
}
