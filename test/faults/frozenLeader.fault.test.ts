import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createBrokerLab, describeOnBroker } from '../support/broker.ts';
import { describeOnPostgres } from '../support/postgres.ts';
import { frozenLeaderFaults, runFrozenLeader } from './frozenLeaderScenario.ts';

// RELIABILITY.md row "frozen relay leader": the relay-lease holder frozen with SIGSTOP; the other
// engine takes the lease within its bound and delivers, and the thawed one publishes nothing more.
// Needs RabbitMQ, PostgreSQL and the built CLI (npm test builds first).

describeOnBroker('frozen relay leader', () => {
  describeOnPostgres('frozen relay leader on a PostgreSQL store', () => {
    test(`${frozenLeaderFaults}: the standby takes over and delivers, the thawed one does not publish`, { timeout: 180_000 }, async (t) => {
      const lab = await createBrokerLab('converge-fault-frozen');
      try {
        const r = await runFrozenLeader(lab);
        t.diagnostic(`${r.sent} declarations; delivery back ${r.recoverMs ?? '—'} ms after the SIGSTOP; ${r.notes.join('; ')}`);
        for (const [check, held] of Object.entries(r.checks)) assert.equal(held, true, `${check} did not hold; ${r.notes.join('; ')}`);
        assert.equal(r.lost, 0);
      } finally {
        await lab.remove();
      }
    });
  });
});
