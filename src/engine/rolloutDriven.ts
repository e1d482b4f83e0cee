import type { Recorded } from '../core/events/index.ts';
import type { RolloutState } from '../core/rollout/index.ts';
import type { DrivenLog } from './rolloutProgressAhead.ts';

// What the rollout driver (rolloutDriver.ts) keeps per rollout between rounds, and small helpers of its loop.

/**
 * `moved`: the stream may hold events past `state` (its own appends, any the follow subscription
 * saw, or a round not woken by node changes alone): only then is it read again. Reading it on
 * every round a report flood woke cost a query per round for nothing.
 */
export type Driven = DrivenLog & { state: RolloutState | null; startedAt: bigint; moved: boolean };

/** Rollout events kept for progressAhead: a few batches' worth while the view catches up. */
export const maxLog = 64;

export const driven = (startedAt: bigint): Driven => ({ state: null, startedAt, log: [], cursor: { wave: 0, index: 0 }, moved: true });

/**
 * The status an end event leaves a rollout in ('running' for any other event). A halt is not an
 * end here: under rollbackOnHalt the rollback follows it, and the fold says which (step).
 */
export const endStatus = (e: Recorded): RolloutState['status'] =>
  e.type === 'RolloutCompleted'
    ? 'completed'
    : e.type === 'RolloutAborted'
      ? 'aborted'
      : e.type === 'RollbackCompleted'
        ? 'rolledBack'
        : 'running';
