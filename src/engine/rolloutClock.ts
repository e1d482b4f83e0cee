import type { RolloutState } from '../core/rollout/index.ts';

// The time a rollout's decisions are taken at (docs/design.md §8, "Time in the driver"). The
// wall clock may step (NTP, a VM resumed, an operator's date): a wave timeout measured on it
// fired 1 s into a 3-minute forward step. So the driver anchors each rollout at the last event of
// its stream, as recorded, and runs on from there by the monotonic time elapsed since it first
// read that event. Only the record's own times are wall times; what this process waits is not.

export type RolloutClock = Readonly<{
  /** The rollout's "now" in ms, on the scale of its recorded times, for `decide`. */
  nowMs: (s: RolloutState) => number;
  /** Drop what is kept of a rollout (it ended). */
  forget: (id: string) => void;
}>;

type Anchor = { revision: bigint; atMs: number; monotonicMs: number };

/**
 * `wall` is read once per event of a rollout, when first read here: how long ago it was recorded
 * (never less than 0) is all a process can know of time that passed before it read it (a restart,
 * another engine's record); once the rollout has an anchor here, no more than its monotonic time
 * since. From then on only `monotonic` moves the rollout's time.
 */
export function createRolloutClock(wall: () => number, monotonic: () => number): RolloutClock {
  const anchors = new Map<string, Anchor>();
  return {
    nowMs(s) {
      let a = anchors.get(s.id);
      if (a === undefined || a.revision !== s.revision) {
        const recorded = Date.parse(s.updatedAt);
        // Time since it was recorded, on the wall clock, but never past this rollout's own time
        // carried on from its last anchor: a forward step between the record and this first read
        // (the driver reads its own event when it next decides) is not time that passed.
        const wallNow = wall();
        const read = a === undefined ? wallNow : Math.min(wallNow, a.atMs + (monotonic() - a.monotonicMs));
        a = { revision: s.revision, atMs: recorded + Math.max(0, read - recorded), monotonicMs: monotonic() };
        anchors.set(s.id, a);
      }
      return a.atMs + (monotonic() - a.monotonicMs);
    },
    forget: (id) => void anchors.delete(id),
  };
}
