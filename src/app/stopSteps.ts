import type { Logger } from 'pino';

// The steps of serve's stop, timed (docs/operations.md#shutting-down): each logs its name and ms at
// info as it ends, and a stop past --stop-timeout-ms names the step it was held in, so the one
// that held it up is in the log without a reproduction.

export type StopStep = Readonly<{ step: string; ms: number }>;

export type StopSteps = Readonly<{
  /** Run one step, timed; its failure ends the stop, as before, after its time is logged. */
  run: (step: string, fn: () => Promise<unknown> | unknown) => Promise<void>;
  /** The step running now and how long it has run, else null. */
  current: () => StopStep | null;
  /** The steps ended so far, in order. */
  done: () => readonly StopStep[];
  /** When the first step began (performance.now()), else null: where the stop's bound is counted from. */
  startedAt: () => number | null;
}>;

export function createStopSteps(logger: Logger): StopSteps {
  const ended: StopStep[] = [];
  let running: { step: string; t0: number } | null = null;
  let first: number | null = null;
  return {
    async run(step, fn) {
      const t0 = performance.now();
      first ??= t0;
      running = { step, t0 };
      try {
        await fn();
      } finally {
        const ms = Math.round(performance.now() - t0);
        running = null;
        ended.push({ step, ms });
        logger.info({ step, ms }, `stopped: ${step}`);
      }
    },
    current: () => (running === null ? null : { step: running.step, ms: Math.round(performance.now() - running.t0) }),
    done: () => ended,
    startedAt: () => first,
  };
}

/** Steps that time nothing, for a stop called without a tracker (tests, the demo). */
export const untimedSteps: StopSteps = {
  run: async (_step, fn) => void (await fn()),
  current: () => null,
  done: () => [],
  startedAt: () => null,
};
