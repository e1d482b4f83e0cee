import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createBrokerLab, describeOnBroker } from '../support/broker.ts';
import { postgresFault } from './postgresFailoverScenario.ts';
import type { PgFault } from './postgresFailoverScenario.ts';

// RELIABILITY.md rows "PostgreSQL restart, …" and "PostgreSQL failover to a synchronous standby, …":
// PostgreSQL clusters of the test's own (initdb, pg_ctl, pg_basebackup on free ports, as the
// postgres user when run as root; never the shared server on 5432) restarted or failed over under
// `converge serve`. Needs RabbitMQ, the PostgreSQL server binaries (a clear failure when missing)
// and the built CLI (npm test builds first).

const cases: [PgFault, 1 | 2][] = [
  ['restart', 1],
  ['restart', 2],
  ['promote', 2],
];

describeOnBroker('PostgreSQL restart and failover', () => {
  for (const [fault, engines] of cases) {
    const scenario = postgresFault(fault, engines);
    test(
      `${scenario.name}: nothing confirmed or accepted lost or doubled, the relay lease taken again, delivery resumes`,
      { timeout: 240_000 },
      async (t) => {
        const lab = await createBrokerLab(`converge-fault-pg-${fault}-${engines}`);
        try {
          const r = await scenario.run(lab);
          t.diagnostic(
            `${r.sent} sent, ${r.confirmed} confirmed, ${r.stored} stored; recovered in ${r.recoverMs ?? '—'} ms; ${r.notes.join('; ')}`,
          );
          assert.ok(r.sent > 0);
          assert.equal(r.confirmed, r.sent, 'every report was eventually confirmed by the broker');
          assert.equal(r.lost, 0, 'confirmed reports missing from the store');
          assert.equal(r.duplicated, 0, 'reports stored more than once');
          assert.notEqual(r.recoverMs, null, `never recovered; ${r.notes.join('; ')}`);
          for (const [check, held] of Object.entries(r.checks)) assert.equal(held, true, `${check} did not hold; ${r.notes.join('; ')}`);
        } finally {
          await lab.remove();
        }
      },
    );
  }
});
