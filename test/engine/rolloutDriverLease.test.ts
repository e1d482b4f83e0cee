import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import pino from 'pino';
import { createRolloutDriver } from '../../src/engine/rolloutDriver.ts';
import { createPostgresEventStore } from '../../src/store/postgres/index.ts';
import { testKey } from '../support/history.ts';
import { describeOnPostgres, scratchSchema } from '../support/postgres.ts';
import { rolloutFleet } from '../support/rolloutFleet.ts';
import { until } from '../support/until.ts';

// Exactly one driver acts at a time, by the relay's rule: on a store several engines
// share, only the engine holding the store's `rollouts` lease drives; the other takes over when
// the holder goes.

// The holder renews every ttl/3 and counts itself out 2/3 ttl after its last renewal; a ttl of 5 s
// lost the lease to a stall of the test's own process at load 14. Here the lease changes hands by
// release, which a standby sees within retryMs whatever the ttl, so the ttl is long.
const lease = { retryMs: 50, ttlMs: 60_000 };

/** A logger keeping the lease lines of one driver ("A: rollouts lease taken: …"), for a failure to say who held it when. */
const leaseLog = (who: string, into: string[]) =>
  pino(
    { level: 'info' },
    {
      write: (line: string) => {
        const { msg } = JSON.parse(line) as { msg: string };
        if (msg.includes('lease')) into.push(`${who}: ${msg}`);
      },
    },
  );
const nodes = (n: number): string[] => Array.from({ length: n }, (_, i) => `lease-${i + 1}`);

describeOnPostgres('rollout driver lease on a PostgreSQL store', () => {
  const scratch = scratchSchema('converge_rollout_lease');
  after(async () => {
    await scratch.drop();
  });

  test('two drivers on one store: one decides, the other stands by and finishes the rollout once the first stops', async () => {
    const storeA = createPostgresEventStore(scratch.url, { lease });
    const storeB = createPostgresEventStore(scratch.url, { lease });
    const silent = Object.fromEntries(nodes(6).map((n) => [n, 'silent' as const]));
    const leases: string[] = [];
    const f = await rolloutFleet({ store: storeA, behaviour: silent, driver: { logger: leaseLog('A', leases) } });
    const byB: string[] = [];
    const driverB = createRolloutDriver({
      store: storeB,
      key: testKey,
      logger: leaseLog('B', leases),
      now: f.now,
      nodeOf: (n) => f.runner.readModel.get(n),
      readModelPosition: () => f.runner.readModel.position(),
      pollMs: 10,
      onDecision: (_, d) => byB.push(d.kind),
    });
    try {
      await until('A to hold the lease', () => f.driver.active());
      driverB.start();
      const id = await f.start({ rollout: 'leased', selection: { kind: 'nodes', nodes: nodes(6) }, waves: '2,100%' });
      await until('A to send wave 1', async () => (await f.rollout(id)).sends.size === 2);
      // Only A's release (or a renewal missing for 40 s) hands the lease to B; the lease lines say
      // whether that happened.
      assert.equal(driverB.active(), false, `B stands by; ${leases.join('; ')}`);
      assert.deepEqual(byB, [], `B decided nothing while A held the lease; ${leases.join('; ')}`);

      await f.driver.stop();
      await until('B to take the lease', () => driverB.active());
      for (const n of nodes(6)) f.behave(n, 'apply');
      for (const [node, send] of (await f.rollout(id)).sends) await f.report(node, { declared: send.digest, applied: ['web', 'sidecar'] });
      await until('B to complete the rollout', async () => (await f.rollout(id)).status === 'completed');
      // The driver hears its decision once its append returns, which a read of the store can see first.
      // (byB read through a list of strings: the assertion above narrowed it to an empty one.)
      const decided: readonly string[] = byB;
      await until('B to have heard its completion', () => decided.includes('complete'));
      assert.ok(decided.includes('completeWave'), `B completed a wave: ${decided.join(', ')}`);
      for (const n of nodes(6)) assert.equal((await f.sentTo(n)).length, 1, n);
    } finally {
      await driverB.stop();
      await f.stop();
      await Promise.all([storeA.close(), storeB.close()]);
    }
  });
});
