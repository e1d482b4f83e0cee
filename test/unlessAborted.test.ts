import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setImmediate as turn } from 'node:timers/promises';
import { unlessAborted } from '../src/retry.ts';

// src/retry.ts unlessAborted: the caller lets go of `p` once the signal aborts; `p` itself goes on
// (a signing thread's request), and its failure, when it comes, must not be an unhandled rejection
// (Node 20 ends the process on one). So it is handled when the signal aborts while `p` waits; the
// same must hold when the signal had aborted already.

test('unlessAborted with a signal aborted already leaves no unhandled rejection when p fails later', async (t) => {
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  t.after(() => process.off('unhandledRejection', onUnhandled));

  const abort = new AbortController();
  abort.abort(new Error('stopped'));
  let fail = (_: Error): void => {};
  const p = new Promise<number>((_, reject) => (fail = reject));
  await assert.rejects(unlessAborted(p, abort.signal), /stopped/);
  fail(new Error('the signing pool was closed'));
  await turn();
  await turn();
  assert.deepEqual(
    unhandled.map((e) => (e as Error).message),
    [],
    'p failed after the caller let go: an unhandled rejection',
  );
});
