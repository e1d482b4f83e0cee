import { livenessStates, nodeStatuses } from '../../projections/index.ts';
import type { ReadModel } from '../../src/readModel/readModel.ts';

/**
 * Everything a read model answers at `now`, as plain data: two read models that must agree
 * (bulk catch-up and the per-event path, a columnar cold start and the live one) are compared
 * through this.
 */
export function readModelAnswers(m: ReadModel, now: number) {
  const counts = m.liveness(now);
  return {
    position: m.position(),
    size: m.size(),
    states: [...m.nodes()],
    fleet: m.fleet(now),
    liveness: nodeStatuses.flatMap((s) => livenessStates.map((l) => counts.get(s, l))),
    page: m.page({ limit: 2 }, now),
    filtered: m.page({ status: 'behind', limit: 10 }, now),
  };
}
