import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createBrokerLab, describeOnBroker } from '../support/broker.ts';
import { netnsUnavailable } from '../support/netns.ts';
import { describeOnPostgres } from '../support/postgres.ts';
import { partitionScenarios } from './partitionScenario.ts';

// RELIABILITY.md rows "engine partitioned from …": two `converge serve`, each in a network namespace
// of its own, the active one's link to PostgreSQL, to RabbitMQ, or both cut by dropping packets,
// then healed. Needs RabbitMQ, PostgreSQL, the built CLI (npm test builds first) and root with
// iproute2 (ip netns, tc). Without root it is skipped, saying why; as root a missing capability fails.

const unavailable = await netnsUnavailable();

describeOnBroker('engines on separate hosts, partitioned', () => {
  describeOnPostgres('engines on separate hosts on a PostgreSQL store', () => {
    for (const s of partitionScenarios) {
      test(`${s.name} (${s.faults}): nothing lost or doubled, the lease fenced, declarations in order`, { timeout: 300_000 }, async (t) => {
        if (unavailable !== null) {
          const why = `engines in network namespaces: ${unavailable}`;
          if (process.getuid?.() === 0) assert.fail(why);
          console.warn(`\n*** SKIPPING ${s.name}: ${why} ***\n`);
          t.skip(why);
          return;
        }
        const lab = await createBrokerLab('converge-fault-partition');
        try {
          const r = await s.run(lab);
          t.diagnostic(
            `${r.sent} sent, ${r.confirmed} confirmed, ${r.stored} stored; recovered in ${r.recoverMs ?? '—'} ms; ${r.notes.join('; ')}`,
          );
          assert.ok(r.sent > 0);
          assert.equal(r.confirmed, r.sent, 'every report was eventually confirmed by the broker');
          assert.equal(r.lost, 0, 'confirmed reports missing from the store');
          assert.equal(r.duplicated, 0, 'reports stored more than once');
          assert.notEqual(r.recoverMs, null, 'never recovered');
          for (const [check, held] of Object.entries(r.checks)) assert.equal(held, true, `${check} did not hold; ${r.notes.join('; ')}`);
        } finally {
          await lab.remove();
        }
      });
    }
  });
});
