import { setImmediate as nextTurn } from 'node:timers/promises';

// How much of one event-loop turn a long job may hold. Everything the engine does shares one
// loop with the API: a request that arrives while a job runs waits for the whole turn, so a GET's
// worst latency is the longest turn of any job. A job that loops over many items (signing a batch
// of declarations, delivering a window of messages) asks `spent` after each and, once its slice
// has run `sliceMs`, gives the loop a turn: `if (budget.spent()) await budget.nextSlice()`.
// Bounded by time, not by count: an item's cost differs between jobs and machines.
// It sits at the bottom of the layers (eslint/layers.js) and imports nothing of the project.

/** Default slice: a few ms, so a turn with several jobs' slices in it still answers a GET in about that. */
export const defaultSliceMs = 2;

export type TurnBudget = Readonly<{
  /** True once the slice begun at the last `nextSlice` (or at creation) has run `sliceMs`. */
  spent: () => boolean;
  /** Give the loop a turn (setImmediate) and begin the next slice when it comes back. */
  nextSlice: () => Promise<void>;
}>;

export type TurnBudgetOptions = Readonly<{
  /** Work per turn (ms); 0 gives the loop a turn at every `spend`. */
  sliceMs?: number;
  /** A clock in ms (tests inject one). */
  now?: () => number;
}>;

export function createTurnBudget(options: TurnBudgetOptions = {}): TurnBudget {
  const sliceMs = Math.max(0, options.sliceMs ?? defaultSliceMs);
  const now = options.now ?? (() => performance.now());
  let began = now();
  const spent = (): boolean => now() - began >= sliceMs;
  const nextSlice = async (): Promise<void> => {
    await nextTurn();
    began = now();
  };
  return { spent, nextSlice };
}
