import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createStopSteps } from '../../src/app/stopSteps.ts';
import { stopWithin } from '../../src/app/stopWithin.ts';
import { isConvergeError } from '../../src/core/errors.ts';
import { logger } from '../support/logger.ts';

// serve's bound on its stop: a stop that never ends is given up with CONVERGE_ERR_STOP_TIMEOUT (exit 1).

test('a stop that finishes resolves; one that never does is given up as CONVERGE_ERR_STOP_TIMEOUT', async () => {
  let stopped = false;
  await stopWithin(async () => void (stopped = true), 60_000, logger);
  assert.equal(stopped, true);
  await assert.rejects(
    stopWithin(() => new Promise<void>(() => {}), 50, logger),
    (e: unknown) => isConvergeError(e) && e.code === 'CONVERGE_ERR_STOP_TIMEOUT' && /--stop-timeout-ms \(50 ms\)/.test(e.message),
  );
});

test('a stop past its bound names the step it was held in and what the steps before it took', async () => {
  const steps = createStopSteps(logger);
  const stop = async (): Promise<void> => {
    await steps.run('api', () => undefined);
    await steps.run('snapshot', () => new Promise<void>(() => {}));
  };
  await assert.rejects(stopWithin(stop, 50, logger, steps), (e: unknown) => {
    assert.ok(isConvergeError(e, 'CONVERGE_ERR_STOP_TIMEOUT'));
    assert.match(e.message, /held in its step "snapshot"/);
    assert.equal(e.details?.['heldIn'], 'snapshot');
    assert.deepEqual(
      (e.details?.['steps'] as { step: string }[]).map((s) => s.step),
      ['api'],
    );
    return true;
  });
});
