import { createLatencyHistogram } from './latencyHistogram.ts';
import type { LatencyHistogram } from './latencyHistogram.ts';
import type { LivenessState } from '../node/liveness.ts';
import type { NodeState, NodeStatus } from '../node/nodeState.ts';

// The fleet summary of docs/design.md §7 kept as counters: each node state is added once and removed
// when the fold replaces it, so the live read model answers GET /v1/fleet in the time it takes
// to rank the spec cohorts, not by walking every node (0.5 s at 100,000 nodes). The
// pure summarizeFleet (fleet.ts) is this same tally filled from a list of states, so the live
// answer and the answer for a list of states cannot differ. Liveness depends on "now" and is
// counted by the caller. The summary itself (cohorts ranked, the rest summed, percentiles) is
// summarizeCounts, which the fleet as of a moment (src/readModel/fleetHistory.ts) makes from its own
// counts too, so "now" and "as of" cannot be summarised differently.

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
    /** Nearest-rank percentiles of the nodes' recent latencies: exact below 2,048 ms, within 0.1 % above (latencyHistogram.ts). */
    p50Ms: number | null;
    p90Ms: number | null;
    p99Ms: number | null;
    maxMs: number | null;
    superseded: number;
    acknowledged: number;
  }>;
  anomalies: Readonly<{ stale: number; unknown: number; undeclared: number }>;
}>;

/** What a fleet summary is made of, however it was counted: by the live tally, or from a history's rows as of a moment. */
export type FleetCounts = Readonly<{
  nodes: number;
  byStatus: Readonly<Record<NodeStatus, number>>;
  byLiveness: Readonly<Record<LivenessState, number>>;
  /** Every cohort, in any order. */
  cohorts: Iterable<SpecCohort>;
  /** The nodes' recent convergence latencies. */
  latencies: LatencyHistogram;
  superseded: number;
  acknowledged: number;
  anomalies: Readonly<{ stale: number; unknown: number; undeclared: number }>;
}>;

/** The fleet summary of those counts: the largest cohorts ranked, the rest summed, the latency percentiles; nothing in it shared with `counts`. */
export function summarizeCounts(counts: FleetCounts, options: FleetSummaryOptions = {}): FleetSummary {
  const top = Math.max(0, options.topCohorts ?? 10);
  const ranked = [...counts.cohorts].sort((a, b) => b.nodes - a.nodes || (a.spec < b.spec ? -1 : 1));
  const rest = ranked.slice(top);
  const { latencies } = counts;
  return {
    nodes: counts.nodes,
    byStatus: { ...counts.byStatus },
    byLiveness: { ...counts.byLiveness },
    cohorts: ranked.slice(0, top).map((c) => ({ spec: c.spec, nodes: c.nodes, caughtUp: c.caughtUp, byStatus: { ...c.byStatus } })),
    otherCohorts: {
      cohorts: rest.length,
      nodes: rest.reduce((n, c) => n + c.nodes, 0),
      caughtUp: rest.reduce((n, c) => n + c.caughtUp, 0),
    },
    convergence: {
      samples: latencies.count(),
      p50Ms: latencies.percentile(50),
      p90Ms: latencies.percentile(90),
      p99Ms: latencies.percentile(99),
      maxMs: latencies.max(),
      superseded: counts.superseded,
      acknowledged: counts.acknowledged,
    },
    anomalies: { ...counts.anomalies },
  };
}

export type FleetTally = Readonly<{
  add: (s: NodeState) => void;
  remove: (s: NodeState) => void;
  /**
   * remove(previous) then add(next), leaving out the parts both hold by the same reference: a
   * report re-counted every recent latency of its node twice (32 histogram buckets), ~0.6 µs of
   * each event of a cold start. The counts come out the same.
   */
  replace: (previous: NodeState, next: NodeState) => void;
  /** The summary, with the liveness counts the caller made for its "now". */
  summary: (byLiveness: Readonly<Record<LivenessState, number>>, options?: FleetSummaryOptions) => FleetSummary;
}>;

/** `after` is `before` without its first `dropped` items, plus one more at the end. */
function shiftedBy(before: readonly number[], after: readonly number[], dropped: number): boolean {
  for (let i = dropped; i < before.length; i++) if (before[i] !== after[i - dropped]) return false;
  return true;
}

const noStatus = (): Record<NodeStatus, number> => ({ undeclared: 0, behind: 0, refused: 0, degraded: 0, converged: 0 });

type Cohort = { spec: string; nodes: number; caughtUp: number; byStatus: Record<NodeStatus, number> };

export function createFleetTally(): FleetTally {
  const byStatus = noStatus();
  const cohorts = new Map<string, Cohort>();
  const latencies = createLatencyHistogram();
  const anomalies = { stale: 0, unknown: 0, undeclared: 0 };
  let nodes = 0;
  let superseded = 0;
  let acknowledged = 0;

  const cohortOf = (s: NodeState, by: 1 | -1): void => {
    byStatus[s.status] += by;
    if (s.sent !== null) {
      const spec = s.sent.specDigest;
      let c = cohorts.get(spec);
      if (c === undefined) cohorts.set(spec, (c = { spec, nodes: 0, caughtUp: 0, byStatus: noStatus() }));
      c.nodes += by;
      if (s.caughtUp) c.caughtUp += by;
      c.byStatus[s.status] += by;
      if (c.nodes === 0) cohorts.delete(spec);
    }
  };
  const latenciesOf = (s: NodeState, by: 1 | -1): void => latencies.changeAll(s.convergence.recentLatenciesMs, by);
  const countersOf = (s: NodeState, by: 1 | -1): void => {
    superseded += by * s.convergence.superseded;
    acknowledged += by * s.convergence.acknowledged;
    anomalies.stale += by * s.anomalies.stale;
    anomalies.unknown += by * s.anomalies.unknown;
    anomalies.undeclared += by * s.anomalies.undeclared;
  };
  // A retired node is out of the fleet's counts (docs/design.md §3 "Retired nodes").
  const change = (s: NodeState, by: 1 | -1): void => {
    if (s.retiredAt !== null) return;
    nodes += by;
    cohortOf(s, by);
    latenciesOf(s, by);
    countersOf(s, by);
  };

  return {
    add: (s) => change(s, 1),
    remove: (s) => change(s, -1),
    replace(previous, next) {
      if (previous.retiredAt !== null || next.retiredAt !== null) {
        change(previous, -1);
        change(next, 1);
        return;
      }
      if (previous.status !== next.status || previous.sent !== next.sent || previous.caughtUp !== next.caughtUp) {
        cohortOf(previous, -1);
        cohortOf(next, 1);
      }
      const before = previous.convergence.recentLatenciesMs;
      const after = next.convergence.recentLatenciesMs;
      if (before !== after) {
        // The usual step is an acknowledgement: one latency appended, the oldest dropped once the
        // list is full. Only those two change buckets; re-counting all 32 was ~0.2 µs of each
        // event of a cold start (latencyBucket's log2 per sample). The counts come out the same.
        const dropped = after.length === before.length ? 1 : after.length === before.length + 1 ? 0 : -1;
        if (dropped >= 0 && after.length > 0 && shiftedBy(before, after, dropped)) {
          if (dropped === 1) latencies.remove(before[0]!);
          latencies.add(after[after.length - 1]!);
        } else {
          latenciesOf(previous, -1);
          latenciesOf(next, 1);
        }
      }
      countersOf(previous, -1);
      countersOf(next, 1);
    },
    summary: (byLiveness, options) =>
      summarizeCounts({ nodes, byStatus, byLiveness, cohorts: cohorts.values(), latencies, superseded, acknowledged, anomalies }, options),
  };
}
