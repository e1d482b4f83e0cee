import assert from 'node:assert/strict';
import { test } from 'node:test';
import { describeOnPostgres, probePostgres } from './postgres.ts';

// The probe that decides whether a PostgreSQL suite runs is started when the suite registers, and
// a `before` hook elsewhere in the file may then hold the event loop for minutes (the upgrade test
// builds the previous release synchronously when no cached build exists). Past the hold, the
// connection's timeout fires before its answer is read: one attempt is not a verdict.

describeOnPostgres('probePostgres', () => {
  test('a probe whose event loop was held past its connect timeout tries again and finds the server', async () => {
    const probing = probePostgres();
    // Hold the loop past one attempt's 3 s connect timeout, as a synchronous build does.
    const until = performance.now() + 3_500;
    while (performance.now() < until);
    assert.deepEqual(await probing, { ok: true });
  });
});
