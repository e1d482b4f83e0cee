import { startIngestOverAmqp } from '../support/faults/ingestOverAmqp.ts';
import type { IngestOverAmqp } from '../support/faults/ingestOverAmqp.ts';
import type { EventStore } from '../../src/store/index.ts';
import { createBrokerLab } from '../support/broker.ts';
import type { BrokerLab } from '../support/broker.ts';
import { logger } from '../support/logger.ts';

// What a fault scenario is (test/faults/scenarios.ts runs them): its lab, the result it returns and
// RELIABILITY.md reports, the engine it starts, the seed of its fault schedule.

export type ScenarioResult = {
  scenario: string;
  faults: string;
  sent: number;
  confirmed: number;
  stored: number;
  lost: number;
  duplicated: number;
  hostileTried: number;
  hostileAppended: number;
  /** From the end of the last fault to every confirmed report stored; null if it never recovered. */
  recoverMs: number | null;
  notes: string[];
  /** Scenario-specific facts that must hold (tests assert every one is true). */
  checks: Record<string, boolean>;
};

export type Scenario = Readonly<{ name: string; faults: string; run: (lab: FaultLab) => Promise<ScenarioResult> }>;

/**
 * The result of a scenario that changes a finished log (or a bundle of it) instead of running an
 * engine: every event written is stored and none lost or duplicated, there is nothing to recover,
 * hostile tried counts the changes made and hostile appended those not found.
 */
export const auditScenarioResult = (
  scenario: Pick<Scenario, 'name' | 'faults'>,
  r: Readonly<{ events: number; tried: number; missed: number; notes: string[]; checks: Record<string, boolean> }>,
): ScenarioResult => ({
  scenario: scenario.name,
  faults: scenario.faults,
  sent: r.events,
  confirmed: r.events,
  stored: r.events,
  lost: 0,
  duplicated: 0,
  hostileTried: r.tried,
  hostileAppended: r.missed,
  recoverMs: null,
  notes: r.notes,
  checks: r.checks,
});

/** Each scenario runs in a broker lab of its own (test/support/broker.ts). */
export type FaultLab = BrokerLab;
export const createFaultLab = createBrokerLab;

export const startEngine = (url: string, store: EventStore, heartbeatSeconds = 2): Promise<IngestOverAmqp> =>
  startIngestOverAmqp({ url, store, logger, heartbeatSeconds, connectionName: 'converge-fault-engine' });

/** The seed for seeded fault schedules: CONVERGE_FAULT_SEED replays a run; otherwise a fresh one, printed. */
export function faultSeed(what: string): number {
  const given = process.env['CONVERGE_FAULT_SEED'];
  const seed = given !== undefined && given !== '' ? Number(given) : (Date.now() ^ (Math.random() * 0x7fffffff)) | 0;
  process.stderr.write(`faults: ${what}: seed ${seed} (replay with CONVERGE_FAULT_SEED=${seed})\n`);
  return seed;
}
