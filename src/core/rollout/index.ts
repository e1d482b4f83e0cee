export { rolloutStatuses, isTerminal, targetsComplete, waveDeadline, supersededPolicy, rollbackPolicy } from './state.ts';
export type {
  GateState,
  RolloutStatus,
  WaveState,
  RolloutSend,
  RolloutSkip,
  RolloutState,
  NodeFacts,
  RollbackSend,
  RollbackState,
} from './state.ts';
export {
  nodeOutcomes,
  operatorSkipCodes,
  isOperatorSkip,
  isFailure,
  nodeOutcome,
  failureDetail,
  lateFailure,
  notConnectedAt,
  defaultSilentGraceMs,
} from './outcome.ts';
export type { NodeOutcome } from './outcome.ts';
export { budgetUsed, completedTally, openTally, decide, waveProgress, lateOf, eventOfDecision } from './decide.ts';
export type { WaveProgress, Decision, Late } from './decide.ts';
export { criteriaOf, parseCriteria, allowedBy, failuresOf, tripped, addTally, classesFor } from './criteria.ts';
export type { Tally, Tripped } from './criteria.ts';
export { planWaves, planBudget, selectTargets } from './plan.ts';
export type { WavePlan, TargetSelection } from './plan.ts';
export { owesRollback, rollbackTargets, rollbackOutcome, rollbackProgress, rollbackDeadline, decideRollback } from './rollback.ts';
export type { RollbackProgress } from './rollback.ts';
export { noHold, holding, heldFailures } from './lateHold.ts';
export type { LateHold } from './lateHold.ts';
export { allowance, allowedAt, meterOf } from './rate.ts';
export type { Meter } from './rate.ts';
