// How much of one event-loop turn a long job may hold. Everything the engine does shares one
// loop with the API: a request that arrives while a job runs waits for the whole turn, so a GET's
// worst latency is the longest turn of any job. A job that loops over many items (signing a batch
// of declarations, delivering a window of messages) asks `spent` after each and, once its slice
// has run `sliceMs`, gives the loop a turn: `if (budget.spent()) await budget.nextSlice()`.
// Bounded by time, not by count: an item's cost differs between jobs and machines.
// It sits at the bottom of the layers (eslint/layers.js) and imports nothing of the project.
//
// Jobs that give the loop back wait in one queue (`sharedTurns`), and each turn of the loop
// resumes one of them: several jobs yielding at once (the rollout driver signing, the read model
// folding, the relay publishing) take turns instead of each running a slice in the same turn,
// which had added their slices up in front of every request.

/** Default slice: a few ms, so a request waits about that for the job whose turn it is. */
export const defaultSliceMs = 2;

export type TurnQueue = Readonly<{
  /** Resolves in a later turn of the loop, once the jobs that asked before have had theirs: one a turn. */
  next: () => Promise<void>;
}>;

/** A queue of jobs waiting for the loop. */
function createTurnQueue(): TurnQueue {
  const waiters: (() => void)[] = [];
  let armed = false;
  const arm = (): void => {
    if (armed) return;
    armed = true;
    setImmediate(dispatch);
  };
  // One waiter a turn: a callback deferred from the setImmediate phase runs in the next turn.
  function dispatch(): void {
    armed = false;
    const resume = waiters.shift();
    if (waiters.length > 0) arm();
    resume?.();
  }
  return {
    next: () =>
      new Promise<void>((resolve) => {
        waiters.push(resolve);
        arm();
      }),
  };
}

/** The engine's one queue: every job on the main thread that yields goes through it. */
export const sharedTurns: TurnQueue = createTurnQueue();

/** Give the loop back and come back in this job's turn (`sharedTurns`). */
export const nextTurn = (): Promise<void> => sharedTurns.next();

export type TurnBudget = Readonly<{
  /** True once the slice begun at the last `nextSlice` (or at creation) has run `sliceMs`. */
  spent: () => boolean;
  /** Give the loop back (`sharedTurns`) and begin the next slice in this job's turn. */
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
    await sharedTurns.next();
    began = now();
  };
  return { spent, nextSlice };
}
