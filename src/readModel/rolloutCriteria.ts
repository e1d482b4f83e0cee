import { addTally, allowedBy, completedTally, criteriaOf, failuresOf, supersededPolicy } from '../core/rollout/index.ts';
import type { RolloutState, Tally } from '../core/rollout/index.ts';
import type { FailureReason } from '../core/events/index.ts';

// How a rollout's abort criteria stand now (src/core/rollout/criteria.ts), for its summary: the
// completed waves' failures by class and the open wave's counts, against each criterion.

/** The open wave's counts, as the rollout view keeps them (WaveCounts). */
type OpenCounts = Readonly<{ done: number; failed: number; refused: number; degraded: number; unsendable: number; superseded: number }>;

export type CriterionNow = Readonly<{
  asGiven: string;
  classes: readonly FailureReason[];
  count: number | null;
  percent: number | null;
  minSettled: number;
  failures: number;
  /** What it allows over the nodes settled now (null: fewer than minSettled settled). */
  allowed: number | null;
  settled: number;
}>;

/** The criteria over the completed waves' tally and the open wave's counts now. */
export function criteriaNow(s: RolloutState, open: OpenCounts | undefined): CriterionNow[] {
  const supersededFail = supersededPolicy(s) === 'fail';
  const openTally: Tally =
    open === undefined
      ? { byClass: {}, unclassified: 0, settled: 0 }
      : {
          byClass: {
            refused: open.refused,
            degraded: open.degraded,
            unsendable: open.unsendable,
            ...(supersededFail ? { superseded: open.superseded } : {}),
          },
          unclassified: 0,
          settled: open.done + open.failed + (supersededFail ? open.superseded : 0),
        };
  const t = addTally(completedTally(s), openTally);
  return criteriaOf(s.started).map((c) => ({
    asGiven: c.asGiven,
    classes: c.classes,
    count: c.count ?? null,
    percent: c.percent ?? null,
    minSettled: c.minSettled,
    failures: failuresOf(c, t),
    allowed: allowedBy(c, t.settled),
    settled: t.settled,
  }));
}
