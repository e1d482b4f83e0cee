export { foldNode, foldNodeEvents, initialNodeState, classifyReport, recentLatencyLimit } from './nodeState.ts';
export type { NodeState, NodeStatus, ReportClass, SentSummary, ReportedSummary, Anomalies } from './nodeState.ts';
export { livenessAt, defaultGraceMs } from './liveness.ts';
export type { Liveness, LivenessState } from './liveness.ts';
export { summarizeFleet, percentile } from './fleet.ts';
export type { FleetSummary, DigestCohort } from './fleet.ts';
export { nodeView } from './nodeView.ts';
export type { NodeView } from './nodeView.ts';
