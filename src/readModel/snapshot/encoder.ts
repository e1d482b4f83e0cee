import { nodeStatuses, reportClasses } from '../../../projections/index.ts';
import type { NodeState } from '../../../projections/index.ts';
import type { ColumnName, TableName } from './columns.ts';

// Node states → column values and shared tables (columns.ts names both), in either format: the
// writer hands the values to columnPartsSliced.ts (format 5), the format-4 test writer to JSON.

/** Equal values get one index; the objects the fold shares are found by identity first. */
function createTable<T>(key: (v: T) => string) {
  const byObject = new Map<T, number>();
  const byKey = new Map<string, number>();
  const values: T[] = [];
  return {
    values,
    indexOf(v: T): number {
      let i = byObject.get(v);
      if (i !== undefined) return i;
      const k = key(v);
      i = byKey.get(k);
      if (i === undefined) {
        i = values.length;
        values.push(v);
        byKey.set(k, i);
      }
      byObject.set(v, i);
      return i;
    },
  };
}

export type Encoder = Readonly<{
  /** One column's values over states [from, to). */
  values: (name: ColumnName, from: number, to: number) => unknown[];
  /** A table's values; complete once every column is encoded. */
  table: (name: TableName) => unknown[];
}>;

/** Column values of immutable states: the caller encodes in slices and may yield between them. */
export function createEncoder(states: readonly NodeState[], position: bigint): Encoder {
  const specs = createTable<string>((s) => s);
  const lists = createTable<readonly string[]>((l) => JSON.stringify(l));
  const ports = createTable<readonly number[]>((l) => JSON.stringify(l));
  const failures = createTable<Readonly<Record<string, string>>>((f) => JSON.stringify(Object.entries(f)));
  // Positions and revisions are numbers while safe integers (a state's are never past the snapshot's
  // position); past 2^53 — never, in practice — the whole column is written as decimal strings.
  const bigAsString = position > BigInt(Number.MAX_SAFE_INTEGER);
  const bigValue = (v: bigint): number | string => (bigAsString ? v.toString() : Number(v));
  // A time equal to the report's is written as `true`: one string fewer to write and to read back.
  const sameAsReport = (s: NodeState, t: string | null): string | null | true => (t !== null && t === s.reported?.receivedAt ? true : t);
  const pick: Record<ColumnName, (s: NodeState) => unknown> = {
    node: (s) => s.node,
    status: (s) => nodeStatuses.indexOf(s.status),
    caughtUp: (s) => s.caughtUp,
    sentDigest: (s) => s.sent?.digest ?? null,
    sentSpec: (s) => (s.sent === null ? -1 : specs.indexOf(s.sent.specDigest)),
    sentSerial: (s) => s.sent?.serial ?? 0,
    sentAt: (s) => s.sent?.sentAt ?? null,
    sentResources: (s) => (s.sent === null ? -1 : lists.indexOf(s.sent.resourceIds)),
    sentAcknowledgedAt: (s) => sameAsReport(s, s.sent?.acknowledgedAt ?? null),
    receivedAt: (s) => s.reported?.receivedAt ?? null,
    declared: (s) => (s.reported === null ? null : s.sent !== null && s.reported.declared === s.sent.digest ? true : s.reported.declared),
    class: (s) => (s.reported === null ? -1 : reportClasses.indexOf(s.reported.class)),
    applied: (s) => (s.reported === null ? -1 : lists.indexOf(s.reported.applied)),
    failed: (s) => (s.reported === null ? -1 : failures.indexOf(s.reported.failed)),
    refused: (s) => s.reported?.refused ?? '',
    reportedCarried: (s) => (s.reported === null ? -1 : ports.indexOf(s.reported.carried)),
    missing: (s) => lists.indexOf(s.missing),
    carried: (s) => ports.indexOf(s.carried),
    lastSeenAt: (s) => sameAsReport(s, s.lastSeenAt),
    retiredAt: (s) => s.retiredAt,
    stale: (s) => s.anomalies.stale,
    unknown: (s) => s.anomalies.unknown,
    undeclared: (s) => s.anomalies.undeclared,
    lastLatencyMs: (s) => s.convergence.lastLatencyMs,
    recentLatenciesMs: (s) => s.convergence.recentLatenciesMs,
    acknowledged: (s) => s.convergence.acknowledged,
    superseded: (s) => s.convergence.superseded,
    earlierSends: (s) => s.earlierSends,
    reports: (s) => s.reports,
    lastReportId: (s) => s.lastReportId,
    position: (s) => bigValue(s.position),
    revision: (s) => bigValue(s.revision),
  };
  return {
    values(name, from, to) {
      const f = pick[name];
      const out = new Array<unknown>(to - from);
      for (let i = from; i < to; i++) out[i - from] = f(states[i]!);
      return out;
    },
    table(name) {
      switch (name) {
        case 'specs':
          return specs.values;
        case 'lists':
          return lists.values;
        case 'ports':
          return ports.values;
        case 'failures':
          return failures.values.map((f) => Object.entries(f));
      }
    },
  };
}
