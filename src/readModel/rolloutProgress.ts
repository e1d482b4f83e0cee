import { failureDetail, isFailure, lateOf } from '../core/rollout/index.ts';
import type { NodeOutcome, WaveProgress } from '../core/rollout/index.ts';
import type { RolloutFailure } from '../core/events/index.ts';
import { zero } from './rolloutViewTypes.ts';
import type { Entry, Lookup, Tracked } from './rolloutViewTypes.ts';

// How the open wave's nodes stand, for the driver's decision (src/core/rollout/decide.ts): the
// counts the view keeps as events fold, and lists built from the wave's targets when first read.

export function progressOf(r: Tracked, { entryOf, nodeOf }: Lookup, graceMs: number, limit = 1_000): WaveProgress | null {
  const s = r.state;
  const w = s.waves[s.current - 1];
  if (w === undefined || w.startedAt === null) return null;
  const c = r.counts[w.wave - 1] ?? zero();
  const size = w.to - w.from;
  const failureCount = c.refused + c.degraded + c.unsendable;
  const unsentCount = Math.max(0, size - (c.pending + c.done + failureCount + c.superseded + c.skipped));
  const collect = <T>(want: (o: NodeOutcome) => boolean, make: (node: string, entry: Entry | undefined) => T, max = limit): T[] => {
    const out: T[] = [];
    for (let i = w.from; i < w.to && out.length < max; i++) {
      const node = s.targets[i];
      if (node === undefined) continue;
      const entry = entryOf(r, node);
      if (want(entry?.outcome ?? 'unsent')) out.push(make(node, entry));
    }
    return out;
  };
  let unsent: readonly string[] | null = null;
  let failures: readonly RolloutFailure[] | null = null;
  return {
    wave: w.wave,
    get unsent() {
      unsent ??=
        unsentCount === 0
          ? []
          : collect(
              (o) => o === 'unsent',
              (n) => n,
            );
      return unsent;
    },
    unsentCount,
    pending: c.pending,
    done: c.done,
    superseded: c.superseded,
    skipped: c.skipped,
    get failures() {
      failures ??=
        failureCount === 0
          ? []
          : collect(isFailure, (node, entry) => ({
              node,
              reason: entry!.outcome as RolloutFailure['reason'],
              detail: failureDetail(entry!.outcome, nodeOf(node), entry!.skip),
            }));
      return failures;
    },
    failureCount,
    failuresByClass: { refused: c.refused, degraded: c.degraded, unsendable: c.unsendable },
    // Every pending node is classified (by liveness, which moves with the clock), so the walk is
    // over the whole wave; it is taken once, when the wave times out.
    late: (nowMs) =>
      lateOf(
        collect(
          (o) => o === 'pending',
          (n) => n,
          Number.POSITIVE_INFINITY,
        ),
        nodeOf,
        nowMs,
        graceMs,
        limit,
      ),
    // Asked at every wave's completion: with none counted, a walk over the wave (50,000 nodes in
    // a large rollout's last waves, one turn of tens of ms) would find none.
    supersededNodes: () =>
      c.superseded === 0
        ? []
        : collect(
            (o) => o === 'superseded',
            (n) => n,
          ),
  };
}
