import assert from 'node:assert/strict';
import { test } from 'node:test';
import { describeOnBroker } from '../support/broker.ts';
import { createFaultLab } from './faultScenario.ts';
import type { ScenarioResult, Scenario } from './faultScenario.ts';
import { baseline, closeAllConnections, proxyBlackhole, proxyReset } from './connectionScenarios.ts';
import { diskFull, storeUnavailable } from './storeScenarios.ts';
import { engineSigkill } from './engineSigkillScenario.ts';
import { hostileOverBroker } from './hostileOverBrokerScenario.ts';

// Fault scenarios against the real broker and the real ingest (src/engine/ingest/ over
// src/transport), shared by test/faults/*.fault.test.ts (which assert lost = duplicated =
// hostile appended = 0) and test/faults/report.ts (which writes RELIABILITY.md).
//
// Every scenario: a fresh vhost, real node accounts (so RabbitMQ validates user_id), nodes that
// publish reports with stable message ids and retry until the broker confirms (as the Go node
// does), the engine ingesting into SQLite, a fault while that runs, then the tally: every
// confirmed report must be stored exactly once.
//
// What a scenario is, its nodes and its tally are in faultScenario.ts, faultNodes.ts and
// faultTally.ts; the scenarios run here by theme in connectionScenarios.ts, storeScenarios.ts,
// engineSigkillScenario.ts and hostileOverBrokerScenario.ts, the others in *Scenario.ts files.

export type { FaultLab, Scenario, ScenarioResult } from './faultScenario.ts';
export { auditScenarioResult, createFaultLab, faultSeed, startEngine } from './faultScenario.ts';
export type { Load, NodeConn } from './faultNodes.ts';
export { connectNode, nodeIds, PACE_MS, PER_NODE, publishUntilConfirmed, startLoad, withNodes } from './faultNodes.ts';
export type { Stored } from './faultTally.ts';
export { countStored, readStored, recoveryFrom, settleAll, tally, timeToStore } from './faultTally.ts';
export { baseline, closeAllConnections, proxyBlackhole, proxyReset } from './connectionScenarios.ts';
export { diskFull, storeUnavailable } from './storeScenarios.ts';
export { engineSigkill, sigkillCount } from './engineSigkillScenario.ts';
export { hostileOverBroker } from './hostileOverBrokerScenario.ts';

export const allScenarios: readonly Scenario[] = [
  baseline,
  proxyReset,
  proxyBlackhole,
  closeAllConnections,
  storeUnavailable,
  diskFull,
  engineSigkill,
  hostileOverBroker,
];

/** Run one scenario in its own vhost, always cleaning up. */
export async function runScenario(s: Scenario): Promise<ScenarioResult> {
  const lab = await createFaultLab(`converge-fault-${s.name.replace(/[^a-z0-9]+/gi, '-').toLowerCase()}`);
  try {
    return await s.run(lab);
  } finally {
    await lab.remove();
  }
}

/**
 * Register each scenario as a test asserting what RELIABILITY.md promises. Without a broker:
 * one failing test under CONVERGE_REQUIRE_BROKER=1, else one loudly skipped test.
 */
export function registerScenarioTests(what: string, scenarios: readonly Scenario[]): void {
  describeOnBroker(what, () => {
    for (const s of scenarios) {
      void test(
        `${s.name} (${s.faults}): every confirmed report stored exactly once, no hostile input appended`,
        { timeout: 240_000 },
        async (t) => {
          const r = await runScenario(s);
          if (r.notes.some((n) => n.startsWith('skipped:'))) {
            console.warn(`\n*** SKIPPING ${s.name}: ${r.notes.join('; ')} ***\n`);
            t.skip(r.notes.join('; '));
            return;
          }
          t.diagnostic(
            `${r.sent} sent, ${r.confirmed} confirmed, ${r.stored} stored; recovered in ${r.recoverMs ?? '—'} ms; ${r.notes.join('; ')}`,
          );
          assert.ok(r.sent > 0);
          assert.equal(r.confirmed, r.sent, 'every report was eventually confirmed by the broker');
          assert.equal(r.lost, 0, 'confirmed reports missing from the store');
          assert.equal(r.duplicated, 0, 'reports stored more than once');
          assert.equal(r.stored, r.confirmed);
          assert.equal(r.hostileAppended, 0, 'hostile input became events');
          assert.notEqual(r.recoverMs, null, 'never recovered');
          for (const [check, held] of Object.entries(r.checks)) assert.equal(held, true, `${check} did not hold; ${r.notes.join('; ')}`);
        },
      );
    }
  });
}
