import { livenessAt } from './liveness.ts';
import type { LivenessState } from './liveness.ts';
import type { NodeState, NodeStatus } from './nodeState.ts';

// The fleet summary of DESIGN §7 `GET /v1/fleet`: counts by status and liveness, cohorts of
// nodes by the spec they were sent, and convergence latency percentiles. It is a pure function of
// the node states (which are the fold) and "now" (for liveness).
//
// A cohort is the nodes whose latest send has one spec digest (DESIGN §2). A declaration's own
// digest names its node, serial and time, so it is unique per send and cannot group a fleet.

export type SpecCohort = Readonly<{
  spec: string;
  /** Nodes whose latest send is this spec. */
  nodes: number;
  /** Of those, the ones whose latest report names that send's digest (converged, degraded or refused). */
  caughtUp: number;
  byStatus: Readonly<Record<NodeStatus, number>>;
}>;

export type FleetSummaryOptions = Readonly<{
  /** Cohorts listed, largest first; the rest are summed in otherCohorts. Default 10. */ topCohorts?: number;
}>;

export type FleetSummary = Readonly<{
  nodes: number;
  byStatus: Readonly<Record<NodeStatus, number>>;
  byLiveness: Readonly<Record<LivenessState, number>>;
  /** The largest spec cohorts, largest first (ties by spec digest). */
  cohorts: readonly SpecCohort[];
  /** The cohorts not listed, summed. */
  otherCohorts: Readonly<{ cohorts: number; nodes: number; caughtUp: number }>;
  convergence: Readonly<{
    samples: number;
    p50Ms: number | null;
    p90Ms: number | null;
    p99Ms: number | null;
    maxMs: number | null;
    superseded: number;
    acknowledged: number;
  }>;
  anomalies: Readonly<{ stale: number; unknown: number; undeclared: number }>;
}>;

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted: readonly number[], p: number): number | null {
  if (sorted.length === 0) return null;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))] ?? null;
}

const noStatus = (): Record<NodeStatus, number> => ({ undeclared: 0, behind: 0, refused: 0, degraded: 0, converged: 0 });

export function summarizeFleet(
  states: Iterable<NodeState>,
  now: Date | number,
  graceMs?: number,
  options: FleetSummaryOptions = {},
): FleetSummary {
  const byStatus = noStatus();
  const byLiveness: Record<LivenessState, number> = { connected: 0, disconnected: 0, 'never-seen': 0 };
  const cohorts = new Map<string, { spec: string; nodes: number; caughtUp: number; byStatus: Record<NodeStatus, number> }>();
  const latencies: number[] = [];
  const anomalies = { stale: 0, unknown: 0, undeclared: 0 };
  let nodes = 0;
  let superseded = 0;
  let acknowledged = 0;
  for (const s of states) {
    nodes++;
    byStatus[s.status]++;
    byLiveness[livenessAt(s.lastSeenAt, now, graceMs).state]++;
    if (s.sent !== null) {
      const spec = s.sent.specDigest;
      let c = cohorts.get(spec);
      if (c === undefined) cohorts.set(spec, (c = { spec, nodes: 0, caughtUp: 0, byStatus: noStatus() }));
      c.nodes++;
      if (s.caughtUp) c.caughtUp++;
      c.byStatus[s.status]++;
    }
    for (const l of s.convergence.recentLatenciesMs) latencies.push(l);
    superseded += s.convergence.superseded;
    acknowledged += s.convergence.acknowledged;
    anomalies.stale += s.anomalies.stale;
    anomalies.unknown += s.anomalies.unknown;
    anomalies.undeclared += s.anomalies.undeclared;
  }
  latencies.sort((a, b) => a - b);
  const ranked = [...cohorts.values()].sort((a, b) => b.nodes - a.nodes || (a.spec < b.spec ? -1 : 1));
  const top = Math.max(0, options.topCohorts ?? 10);
  const rest = ranked.slice(top);
  return {
    nodes,
    byStatus,
    byLiveness,
    cohorts: ranked.slice(0, top),
    otherCohorts: {
      cohorts: rest.length,
      nodes: rest.reduce((n, c) => n + c.nodes, 0),
      caughtUp: rest.reduce((n, c) => n + c.caughtUp, 0),
    },
    convergence: {
      samples: latencies.length,
      p50Ms: percentile(latencies, 50),
      p90Ms: percentile(latencies, 90),
      p99Ms: percentile(latencies, 99),
      maxMs: latencies.at(-1) ?? null,
      superseded,
      acknowledged,
    },
    anomalies,
  };
}
