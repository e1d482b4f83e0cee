import type { RolloutFailure } from '../events/index.ts';

// docs/design.md §8 "Timeouts while not observed": a node's report reaches the record only
// while an engine consumes from the broker. While none does, a node still behind proves nothing,
// so a timeout is not decided; once one consumes again the reports queued meanwhile are still
// arriving, so the driver holds the timeout a while longer (a grace, src/engine/rolloutDriverStep.ts).

/** When late nodes may be judged, and why not before. */
export type LateHold = Readonly<{
  /** The earliest time, on the rollout's time scale (ms); null: not until observation resumes. */
  fromMs: number | null;
  why: string;
}>;

/** No hold: late nodes are judged at the timeout. */
export const noHold: LateHold = { fromMs: Number.NEGATIVE_INFINITY, why: '' };

/** Whether the hold keeps late nodes from being judged at `nowMs`. */
export const holding = (hold: LateHold, nowMs: number): boolean => hold.fromMs === null || nowMs < hold.fromMs;

/**
 * The late failures as recorded: when the hold ran past the timeout, each says so, so `rollout
 * explain` tells a timeout decided after an outage from one decided when it fell due.
 */
export function heldFailures(failures: readonly RolloutFailure[], hold: LateHold, deadline: number): RolloutFailure[] {
  if (hold.fromMs === null || hold.fromMs <= deadline) return [...failures];
  const note = `; timeout held to ${new Date(hold.fromMs).toISOString()} (${hold.why})`;
  return failures.map((f) => ({ ...f, detail: f.detail + note }));
}
