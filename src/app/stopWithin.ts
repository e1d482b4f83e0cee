import type { Logger } from 'pino';
import { ConvergeError } from '../core/errors.ts';
import type { StopSteps } from './stopSteps.ts';

// serve's bound on its own stop (docs/operations.md#shutting-down).

/**
 * A stop that waits for a broker or a store that does not answer would keep an orchestrator
 * waiting until it SIGKILLs: past `ms`, give up on it and exit 1, which is no worse than a crash
 * (what was not acknowledged is redelivered; the snapshot is refolded).
 */
export async function stopWithin(stop: () => Promise<void>, ms: number, logger: Logger, steps?: StopSteps): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), ms)));
  const outcome = await Promise.race([stop().then(() => 'done' as const), late]).finally(() => clearTimeout(timer));
  if (outcome === 'done') return;
  // The step it was held in, and what the ones before it took: the cause, in the one line an operator sees.
  const held = steps?.current() ?? null;
  const e = new ConvergeError(
    'CONVERGE_ERR_STOP_TIMEOUT',
    `the stop did not finish within --stop-timeout-ms (${ms} ms)${held === null ? '' : `, held in its step "${held.step}" for ${held.ms} ms`}; exiting without it (unacknowledged messages are redelivered)`,
    { details: { stopTimeoutMs: ms, ...(steps === undefined ? {} : { heldIn: held?.step ?? null, steps: steps.done() }) } },
  );
  logger.error({ code: e.code, ...e.details }, e.message);
  throw e;
}
