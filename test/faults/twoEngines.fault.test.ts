import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createBrokerLab, describeOnBroker } from '../support/broker.ts';
import { describeOnPostgres } from '../support/postgres.ts';
import { runTwoEngines, twoEnginesFaults } from './twoEnginesScenario.ts';

// RELIABILITY.md row "two engines, one PostgreSQL store": two `converge serve`
// processes on one PostgreSQL store and one broker; the active one is SIGKILLed under load and the
// other takes over ingest and the relay. Needs RabbitMQ, PostgreSQL and the built CLI (npm test
// builds first).

describeOnBroker('two engines on one store', () => {
  describeOnPostgres('two engines on one PostgreSQL store', () => {
    test(
      `${twoEnginesFaults}: the survivor takes over ingest and the relay, nothing lost or doubled, both APIs agree, replay --verify holds`,
      { timeout: 180_000 },
      async (t) => {
        const lab = await createBrokerLab('converge-fault-two-engines');
        try {
          const r = await runTwoEngines(lab);
          t.diagnostic(
            `${r.sent} sent, ${r.confirmed} confirmed, ${r.stored} stored; takeover in ${r.recoverMs ?? '—'} ms; ${r.notes.join('; ')}`,
          );
          assert.ok(r.sent > 0);
          assert.equal(r.confirmed, r.sent, 'every report was eventually confirmed by the broker');
          assert.equal(r.lost, 0, 'confirmed reports missing from the store');
          assert.equal(r.duplicated, 0, 'reports stored more than once');
          assert.notEqual(r.recoverMs, null, 'the survivor never took over');
          for (const [check, held] of Object.entries(r.checks)) assert.equal(held, true, `${check} did not hold; ${r.notes.join('; ')}`);
        } finally {
          await lab.remove();
        }
      },
    );
  });
});
