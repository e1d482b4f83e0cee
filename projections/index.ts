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
} from './node/nodeState.ts';
export type { NodeState, NodeStatus, ReportClass, SentSummary, ReportedSummary, Anomalies, EarlierSend } from './node/nodeState.ts';
export { createNodeDraft } from './node/nodeDraft.ts';
export type { NodeDraft } from './node/nodeDraft.ts';
export { draftAlive, draftReport, draftRetire, draftSend, foldIntoDraft } from './node/nodeStateFast.ts';
export { draftOf, publishDraft } from './node/publishDraft.ts';
export { livenessAt, defaultGraceMs, newerLastSeen, livenessStates } from './node/liveness.ts';
export { isObserved, livenessByTransition, observedSpans, recordedLivenessAt } from './node/recordedLiveness.ts';
export type { ObservedSpan } from './node/recordedLiveness.ts';
export type { Liveness, LivenessState } from './node/liveness.ts';
export { summarizeFleet, percentile } from './fleet/fleet.ts';
export type { FleetSummary, FleetSummaryOptions, SpecCohort } from './fleet/fleet.ts';
export { createFleetTally, summarizeCounts } from './fleet/fleetTally.ts';
export type { FleetCounts, FleetTally } from './fleet/fleetTally.ts';
export { createLatencyHistogram, latencyBucket, bucketValue } from './fleet/latencyHistogram.ts';
export type { LatencyHistogram } from './fleet/latencyHistogram.ts';
export { nodeView } from './node/nodeView.ts';
export { nodeConditions, conditionTypes, conditionStatuses, conditionReasons } from './node/conditions.ts';
export type { Condition, ConditionType, ConditionStatus, ConditionReason } from './node/conditions.ts';
export type { NodeView } from './node/nodeView.ts';
export {
  parseAt,
  readAt,
  readMoment,
  mustBeInOrder,
  windowProblem,
  maxPosition,
  momentHint,
  eventTime,
  isBeyond,
  stateAt,
  createFleetFold,
  timeline,
  createRaceScanner,
  findRaces,
} from './node/forensics.ts';
export type { At, StoppedFold, FleetFold, TimelineEntry, DeclarationOutcome, Timeline, Race, RaceScanner } from './node/forensics.ts';
export { isBeforeMoment, timelineWindow, windowEnough } from './node/timelineWindow.ts';
export type { TimelineWindow, WindowAnswer } from './node/timelineWindow.ts';
export { foldVersion } from './foldVersion.ts';
export { startRollout, foldRollout, foldRolloutEvents } from './rollout.ts';
export { foldHolds, holdOf, noHolds } from './holds.ts';
export type { Holds, HoldMark, NodeHold } from './holds.ts';
