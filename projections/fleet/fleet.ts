import { createFleetTally } from './fleetTally.ts';
import type { FleetSummary, FleetSummaryOptions } from './fleetTally.ts';
import { livenessAt } from '../node/liveness.ts';
import type { LivenessState } from '../node/liveness.ts';
import type { NodeState } from '../node/nodeState.ts';

// The fleet summary of docs/design.md §7 `GET /v1/fleet`: counts by status and liveness, cohorts of
// nodes by the spec they were sent, and convergence latency percentiles. It is a pure function of
// the node states (which are the fold) and "now" (for liveness).
//
// A cohort is the nodes whose latest send has one spec digest (docs/design.md §2). A declaration's own
// digest names its node, serial and time, so it is unique per send and cannot group a fleet.
//
// The counting is fleetTally.ts, which the live read model keeps up to date as events fold; this
// fills one from a list of states (a fold stopped at some moment, `GET /v1/fleet?at=`, tests).

export type { FleetSummary, FleetSummaryOptions, SpecCohort } from './fleetTally.ts';

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted: readonly number[], p: number): number | null {
  if (sorted.length === 0) return null;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))] ?? null;
}

export function summarizeFleet(
  states: Iterable<NodeState>,
  now: Date | number,
  graceMs?: number,
  options: FleetSummaryOptions = {},
): FleetSummary {
  const tally = createFleetTally();
  const byLiveness: Record<LivenessState, number> = { connected: 0, disconnected: 0, 'never-seen': 0, 'not-observed': 0 };
  for (const s of states) {
    if (s.retiredAt !== null) continue; // out of the fleet (docs/design.md §3 "Retired nodes")
    tally.add(s);
    byLiveness[livenessAt(s.lastSeenAt, now, graceMs).state]++;
  }
  return tally.summary(byLiveness, options);
}
