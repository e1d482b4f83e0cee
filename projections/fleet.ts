import { livenessAt } from './liveness.ts';
import type { LivenessState } from './liveness.ts';
import type { NodeState, NodeStatus } from './nodeState.ts';

// The fleet summary of DESIGN §7 `GET /v1/fleet`: counts by status and liveness, cohorts of
// nodes by the digest they run, and convergence latency percentiles. It is a pure function of
// the node states (which are the fold) and "now" (for liveness).

export type DigestCohort = Readonly<{ digest: string; nodes: number; caughtUp: number }>;

export type FleetSummary = Readonly<{
  nodes: number;
  byStatus: Readonly<Record<NodeStatus, number>>;
  byLiveness: Readonly<Record<LivenessState, number>>;
  /** Nodes grouped by the digest their latest (not refused) report says they applied, largest cohort first. */
  cohorts: readonly DigestCohort[];
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

export function summarizeFleet(states: Iterable<NodeState>, now: Date | number, graceMs?: number): FleetSummary {
  const byStatus: Record<NodeStatus, number> = { undeclared: 0, behind: 0, refused: 0, degraded: 0, converged: 0 };
  const byLiveness: Record<LivenessState, number> = { connected: 0, disconnected: 0, 'never-seen': 0 };
  const cohorts = new Map<string, { nodes: number; caughtUp: number }>();
  const latencies: number[] = [];
  const anomalies = { stale: 0, unknown: 0, undeclared: 0 };
  let nodes = 0;
  let superseded = 0;
  let acknowledged = 0;
  for (const s of states) {
    nodes++;
    byStatus[s.status]++;
    byLiveness[livenessAt(s.lastSeenAt, now, graceMs).state]++;
    // A node runs the digest its latest report says it applied; one that refused it whole
    // runs no part of it, so it joins no cohort.
    const digest = s.reported !== null && s.reported.refused === '' ? s.reported.declared : null;
    if (digest) {
      const c = cohorts.get(digest) ?? { nodes: 0, caughtUp: 0 };
      c.nodes++;
      if (s.caughtUp) c.caughtUp++;
      cohorts.set(digest, c);
    }
    for (const l of s.convergence.recentLatenciesMs) latencies.push(l);
    superseded += s.convergence.superseded;
    acknowledged += s.convergence.acknowledged;
    anomalies.stale += s.anomalies.stale;
    anomalies.unknown += s.anomalies.unknown;
    anomalies.undeclared += s.anomalies.undeclared;
  }
  latencies.sort((a, b) => a - b);
  return {
    nodes,
    byStatus,
    byLiveness,
    cohorts: [...cohorts].map(([digest, c]) => ({ digest, ...c })).sort((a, b) => b.nodes - a.nodes || (a.digest < b.digest ? -1 : 1)),
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
