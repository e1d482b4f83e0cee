export {
  foldNode,
  foldNodeEvents,
  initialNodeState,
  classifyReport,
  serialOfSent,
  statusOf,
  recentLatencyLimit,
  sendHistoryLimit,
  nodeStatuses,
  reportClasses,
} from './nodeState.ts';
export type { NodeState, NodeStatus, ReportClass, SentSummary, ReportedSummary, Anomalies, EarlierSend } from './nodeState.ts';
export { createNodeDraft, draftOf, draftAlive, draftReport, draftSend, foldIntoDraft, publishDraft } from './nodeDraft.ts';
export type { NodeDraft } from './nodeDraft.ts';
export { livenessAt, defaultGraceMs, newerLastSeen, livenessStates } from './liveness.ts';
export type { Liveness, LivenessState } from './liveness.ts';
export { summarizeFleet, percentile } from './fleet.ts';
export type { FleetSummary, FleetSummaryOptions, SpecCohort } from './fleet.ts';
export { createFleetTally, summarizeCounts } from './fleetTally.ts';
export type { FleetCounts, FleetTally } from './fleetTally.ts';
export { createLatencyHistogram, latencyBucket, bucketValue } from './latencyHistogram.ts';
export type { LatencyHistogram } from './latencyHistogram.ts';
export { nodeView } from './nodeView.ts';
export type { NodeView } from './nodeView.ts';
export { parseAt, eventTime, isBeyond, stateAt, createFleetFold, timeline, createRaceScanner, findRaces } from './forensics.ts';
export type { At, StoppedFold, FleetFold, TimelineEntry, DeclarationOutcome, Timeline, Race, RaceScanner } from './forensics.ts';
export { foldVersion } from './foldVersion.ts';
export {
  rolloutStatuses,
  isTerminal,
  startRollout,
  foldRollout,
  foldRolloutEvents,
  targetsComplete,
  waveDeadline,
  nodeOutcomes,
  isFailure,
  nodeOutcome,
  failureDetail,
  decide,
  supersededPolicy,
  budgetUsed,
  eventOfDecision,
  waveProgress,
  planWaves,
  planBudget,
  selectTargets,
} from './rollout.ts';
export type {
  RolloutStatus,
  WaveState,
  RolloutSend,
  RolloutSkip,
  RolloutState,
  NodeOutcome,
  WaveProgress,
  Decision,
  WavePlan,
  TargetSelection,
} from './rollout.ts';
