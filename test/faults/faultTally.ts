import type { EventStore } from '../../src/store/index.ts';
import { until } from '../support/until.ts';
import type { ScenarioResult, Scenario } from './faultScenario.ts';
import type { Load } from './faultNodes.ts';

// The tally of a fault scenario: what the store holds against what the broker confirmed (every
// confirmed report stored exactly once), and how long the store took to hold it all.

export type Stored = { reports: Map<string, number>; aliveByStream: Map<string, number>; reportsByStream: Map<string, number> };

export async function readStored(store: EventStore): Promise<Stored> {
  const reports = new Map<string, number>();
  const aliveByStream = new Map<string, number>();
  const reportsByStream = new Map<string, number>();
  for await (const batch of store.readAll()) {
    for (const e of batch) {
      if (e.type === 'ReportReceived') {
        const id = e.data.transport.messageId ?? `(no id)/${e.id}`;
        reports.set(id, (reports.get(id) ?? 0) + 1);
        reportsByStream.set(e.stream, (reportsByStream.get(e.stream) ?? 0) + 1);
      } else if (e.type === 'AliveSeen') aliveByStream.set(e.stream, (aliveByStream.get(e.stream) ?? 0) + 1);
    }
  }
  return { reports, aliveByStream, reportsByStream };
}

const allStored = async (store: EventStore, ids: Iterable<string>): Promise<boolean> => {
  const { reports } = await readStored(store);
  for (const id of ids) if (!reports.has(id)) return false;
  return true;
};

/**
 * Wait until every confirmed report (by message id) is stored, so a tally counts losses, not lag:
 * the time from now until it was, or null if that did not happen within the limit. The one wait
 * of every fault scenario.
 */
export async function timeToStore(store: () => EventStore, ids: Iterable<string>, limitMs = 60_000): Promise<number | null> {
  const t0 = Date.now();
  const snapshot = [...ids];
  try {
    // Each poll reads the whole store: poll gently.
    await until('every confirmed report to be stored', () => allStored(store(), snapshot), { timeoutMs: limitMs, everyMs: 50 });
    return Date.now() - t0;
  } catch {
    return null;
  }
}

/**
 * Start timing recovery now (just after a fault, or just after it was lifted): resolves with the
 * time until every report confirmed before this moment is stored and, for an instant fault (reset,
 * close, kill), one confirmed after it is stored too — that needs the engine working again
 * (reconnected, restarted), not a backlog that happened to land before the fault. Runs alongside
 * the rest of the load.
 */
export async function recoveryFrom(store: () => EventStore, load: Load, instant: boolean, limitMs = 60_000): Promise<number | null> {
  const t0 = Date.now();
  const before = new Set(load.confirmed());
  try {
    await until(
      'the engine to recover',
      async () => {
        const { reports } = await readStored(store());
        for (const id of before) if (!reports.has(id)) return false;
        // After a lifted fault (blackhole, store down, disk full) nothing could be stored during
        // it, so the backlog alone proves recovery; an instant fault needs a report from after it.
        if (!instant) return true;
        for (const id of reports.keys()) if (!before.has(id)) return true;
        return false;
      },
      { timeoutMs: limitMs, everyMs: 20 },
    );
    return Date.now() - t0;
  } catch {
    return null;
  }
}

/** After the load: wait (bounded) for every confirmed report, so the tally counts losses, not lag. */
export const settleAll = async (store: () => EventStore, load: Load): Promise<void> => {
  await timeToStore(store, load.confirmed());
};

/** Of the confirmed report ids, how many are stored, missing, and stored more than once (the extra copies). */
export function countStored(
  reports: ReadonlyMap<string, number>,
  confirmed: Iterable<string>,
): Pick<ScenarioResult, 'stored' | 'lost' | 'duplicated'> {
  let stored = 0;
  let lost = 0;
  let duplicated = 0;
  for (const id of confirmed) {
    const n = reports.get(id) ?? 0;
    if (n === 0) lost++;
    else stored++;
    if (n > 1) duplicated += n - 1;
  }
  return { stored, lost, duplicated };
}

export async function tally(
  scenario: Scenario,
  store: EventStore,
  load: Load,
  recoverMs: number | null,
  extra: Partial<ScenarioResult> = {},
): Promise<ScenarioResult> {
  const { reports } = await readStored(store);
  const confirmed = load.confirmed();
  return {
    scenario: scenario.name,
    faults: scenario.faults,
    sent: load.sent(),
    confirmed: confirmed.size,
    ...countStored(reports, confirmed),
    hostileTried: 0,
    hostileAppended: 0,
    recoverMs,
    notes: [],
    checks: {},
    ...extra,
  };
}
