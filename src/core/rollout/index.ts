export { rolloutStatuses, isTerminal, targetsComplete, waveDeadline, supersededPolicy } from './state.ts';
export type { RolloutStatus, WaveState, RolloutSend, RolloutSkip, RolloutState, NodeFacts } from './state.ts';
export { nodeOutcomes, isFailure, nodeOutcome, failureDetail } from './outcome.ts';
export type { NodeOutcome } from './outcome.ts';
export { budgetUsed, decide, waveProgress, eventOfDecision } from './decide.ts';
export type { WaveProgress, Decision } from './decide.ts';
export { planWaves, planBudget, selectTargets } from './plan.ts';
export type { WavePlan, TargetSelection } from './plan.ts';
