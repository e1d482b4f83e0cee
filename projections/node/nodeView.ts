import { nodeConditions } from './conditions.ts';
import type { Condition } from './conditions.ts';
import { livenessAt } from './liveness.ts';
import type { Liveness } from './liveness.ts';
import type { Anomalies, NodeState, NodeStatus, ReportedSummary, SentSummary } from './nodeState.ts';

// The node state as people and programs read it (docs/design.md §7): times ISO 8601, positions as
// decimal strings (they are 64-bit), liveness computed for the supplied "now".

export type NodeView = Readonly<{
  node: string;
  status: NodeStatus;
  caughtUp: boolean;
  sent: SentSummary | null;
  reported: ReportedSummary | null;
  missing: readonly string[];
  carried: readonly number[];
  liveness: Liveness;
  /** Converged, CaughtUp, Connected, each with a reason from conditions.ts's closed list (docs/api.md#conditions). */
  conditions: readonly Condition[];
  anomalies: Anomalies;
  convergence: Readonly<{ lastLatencyMs: number | null; acknowledged: number; superseded: number }>;
  reports: number;
  /** docs/design.md §3 "Retired nodes": null while the node is in the fleet. */
  retiredAt: string | null;
  position: string;
}>;

/** `liveness`: judged elsewhere (from the record, recordedLiveness.ts); absent, from the last-seen time and the grace. */
export function nodeView(s: NodeState, now: Date | number, graceMs?: number, liveness?: Liveness): NodeView {
  const live = liveness ?? livenessAt(s.lastSeenAt, now, graceMs);
  return {
    node: s.node,
    status: s.status,
    caughtUp: s.caughtUp,
    sent: s.sent,
    reported: s.reported,
    missing: s.missing,
    carried: s.carried,
    liveness: live,
    conditions: nodeConditions(s, live),
    anomalies: s.anomalies,
    convergence: {
      lastLatencyMs: s.convergence.lastLatencyMs,
      acknowledged: s.convergence.acknowledged,
      superseded: s.convergence.superseded,
    },
    reports: s.reports,
    retiredAt: s.retiredAt,
    // Before its first event a node's fold sits at -1n; outside, "nothing folded yet" is position 0
    // (no store gives an event position 0 to a node stream), so the field stays a decimal string.
    position: s.position < 0n ? '0' : s.position.toString(),
  };
}
