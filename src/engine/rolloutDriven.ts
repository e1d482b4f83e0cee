import type { Recorded } from '../core/events/index.ts';
import type { RolloutState } from '../core/rollout/index.ts';
import type { DrivenLog } from './rolloutProgressAhead.ts';

// What the rollout driver (rolloutDriver.ts) keeps per rollout between rounds, and small helpers of its loop.

/**
 * `moved`: the stream may hold events past `state` (its own appends, any the follow subscription
 * saw, or a round not woken by node changes alone): only then is it read again. Reading it on
 * every round a report flood woke cost a query per round for nothing.
 */
export type Driven = DrivenLog & { state: RolloutState | null; startedAt: bigint; moved: boolean; held: HeldTimeout | null };

/**
 * A timeout past due that the driver holds because no report can arrive (docs/design.md §8
 * "Timeouts while not observed"), kept so the API can say why nothing is decided. Times are on
 * the rollout's scale (ms): since the driver first held it, and the earliest it decides (null:
 * not until reports can arrive again, then a grace more).
 */
export type HeldTimeout = Readonly<{ wave: number | null; sinceMs: number; untilMs: number | null; graceMs: number }>;

/** Rollout events kept for progressAhead: a few batches' worth while the view catches up. */
export const maxLog = 64;

export const driven = (startedAt: bigint): Driven => ({
  state: null,
  startedAt,
  log: [],
  cursor: { wave: 0, index: 0 },
  moved: true,
  held: null,
});

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
