import { nodeStatuses, reportClasses } from '../../../projections/index.ts';
import type { Anomalies, EarlierSend, NodeState, NodeStatus, ReportedSummary, SentSummary } from '../../../projections/index.ts';
import { columnNames, SnapshotContentError, valuesOf } from './columns.ts';
import type { Column, Columns, Tables } from './columns.ts';
import { nullLength, trueLength } from './columnParts.ts';
import { none, NumberListColumn, TextColumn } from './columnsInPlace.ts';

// Checked columns and tables (of either format) → the node states, read in place.

const noAnomalies: Anomalies = Object.freeze({ stale: 0, unknown: 0, undeclared: 0 });
/** Revisions are small: one bigint each for the first few thousand, as a fold would make them anew (cheaper, and less heap). */
const smallBigs = Array.from({ length: 4_097 }, (_, i) => BigInt(i - 1));
const toBig = (v: number | string): bigint => (typeof v === 'number' && v >= -1 && v < 4_096 ? smallBigs[v + 1]! : BigInt(v));

/** A string column's values as tags, without making the strings: -1 null, -2 true, ≥ 0 a string (its length, or 0). */
const tagsOf = (c: Column<string | null | true>): ArrayLike<number> => {
  if (c instanceof TextColumn) return c.lengths;
  const tags = new Int8Array(c.length);
  for (let i = 0; i < c.length; i++) {
    const v = c.at(i);
    tags[i] = v === null ? nullLength : v === true ? trueLength : 0;
  }
  return tags;
};
const timeOf = (c: Column<string | null | true>, i: number): number => {
  if (c instanceof TextColumn) return c.timeAt(i);
  const v = c.at(i);
  return typeof v === 'string' ? Date.parse(v) : NaN;
};

/**
 * What the read model's counters read of a node (fleetTally.ts: status, caughtUp, the send's
 * spec, convergence, anomalies, retiredAt), filled in place for node i without building its state. Only
 * those fields are right: it is handed to FleetTally.add and to nothing else.
 */
export type CountedState = NodeState;

/**
 * The trust checks' view of node i (trust.ts), filled in place without building its
 * state: what statusOf reads of its send and report, as table indices, and the fields it must agree with.
 */
export type StateFacts = {
  status: NodeStatus;
  caughtUp: boolean;
  sent: boolean;
  reported: boolean;
  /** The report names the send's digest (statusOf's caughtUp). */
  declaredIsSent: boolean;
  refused: boolean;
  /** Indices in the lists table (the send's resources, the report's applied) and the failures table. */
  resources: number;
  applied: number;
  failed: number;
  missing: readonly string[];
  carried: readonly number[];
  reportedCarried: readonly number[];
  reports: number;
  position: number | string;
};

/**
 * A snapshot's node states, checked and read in place, for a fast warm start: node ids and their
 * slots are made at once, a node's state (NodeState, sharing the tables' values as the fold
 * shares them) only when `state(i)` builds it. The read model keeps what it builds
 * (ReadModel.restore); `state` makes a new object at each call.
 */
export type DecodedStates = Readonly<{
  length: number;
  /** Node ids in file order. */
  nodes: string[];
  /** Node id → its index. */
  slots: Map<string, number>;
  state: (i: number) => NodeState;
  status: (i: number) => NodeStatus;
  /** The last-seen time as Date.parse gives it (NaN: never seen). */
  lastSeenMs: (i: number) => number;
  /** See CountedState: one object, refilled at each call. */
  counted: (i: number) => CountedState;
  /** See StateFacts: one object, refilled at each call. */
  facts: (i: number) => StateFacts;
}>;

/**
 * Checked columns and tables as states read in place; an index outside its table, a value that
 * contradicts another column or a column of another length throws SnapshotContentError — all
 * checked here, before any state is built.
 */
export function decodeStates(n: number, s: Columns, t: Tables): DecodedStates {
  for (const name of columnNames) {
    if (s[name].length !== n) throw new SnapshotContentError(`column ${name} has ${s[name].length} values for ${n} nodes`);
  }
  // One object per table entry, shared by every node that names it (as the fold shares them).
  const lists = t.lists.map((l) => (l.length === 0 ? none : l));
  const ports = t.ports.map((l) => (l.length === 0 ? none : l));
  const failures = t.failures.map((f) => Object.freeze(Object.fromEntries(f)) as Readonly<Record<string, string>>);
  const convergenceZero: NodeState['convergence'] = Object.freeze({
    lastLatencyMs: null,
    recentLatenciesMs: none,
    acknowledged: 0,
    superseded: 0,
  });
  const outside = (node: string, what: string, i: number): never => {
    throw new SnapshotContentError(`node ${JSON.stringify(node)}: ${what} index ${i} is outside its table`);
  };
  const within = (size: number, i: number, what: string, node: string): void => {
    if (!(i >= 0 && i < size)) outside(node, what, i);
  };
  const nodes = new Array<string>(n);
  const slots = new Map<string, number>();
  // The loops over every node (the checks here, the counters, the trust checks) index arrays.
  const sentTags = tagsOf(s.sentDigest);
  const receivedTags = tagsOf(s.receivedAt);
  const seenTags = tagsOf(s.lastSeenAt);
  const declaredTags = tagsOf(s.declared);
  const status = valuesOf(s.status);
  const caughtUp = valuesOf(s.caughtUp);
  const sentSpec = valuesOf(s.sentSpec);
  const sentResources = valuesOf(s.sentResources);
  const applied = valuesOf(s.applied);
  const failed = valuesOf(s.failed);
  const reportedCarried = valuesOf(s.reportedCarried);
  const missing = valuesOf(s.missing);
  const carried = valuesOf(s.carried);
  const stale = valuesOf(s.stale);
  const unknown = valuesOf(s.unknown);
  const undeclared = valuesOf(s.undeclared);
  const acknowledged = valuesOf(s.acknowledged);
  const superseded = valuesOf(s.superseded);
  const reports = valuesOf(s.reports);
  {
    const sentAtTags = tagsOf(s.sentAt);
    const ackTags = tagsOf(s.sentAcknowledgedAt);
    const cls = valuesOf(s.class);
    // Every check the states' building relies on, node by node in the order the fields are built.
    for (let i = 0; i < n; i++) {
      const node = s.node.at(i);
      slots.set(node, i);
      if (slots.size !== i + 1) throw new SnapshotContentError(`node ${JSON.stringify(node)} appears twice`);
      nodes[i] = node;
      const hasSent = sentTags[i] !== nullLength;
      const hasReport = receivedTags[i] !== nullLength;
      if (hasSent) {
        if (sentAtTags[i] === nullLength) throw new SnapshotContentError(`node ${JSON.stringify(node)}: a send without sentAt`);
        if (ackTags[i] === trueLength && !hasReport)
          throw new SnapshotContentError(`node ${JSON.stringify(node)}: acknowledged by a report it does not have`);
        within(t.specs.length, sentSpec[i]!, 'spec', node);
        within(lists.length, sentResources[i]!, 'resource list', node);
      }
      if (hasReport) {
        if (reportClasses[cls[i]!] === undefined) throw new SnapshotContentError(`node ${JSON.stringify(node)}: a report without a class`);
        if (declaredTags[i] === trueLength && !hasSent)
          throw new SnapshotContentError(`node ${JSON.stringify(node)}: a report names a send it does not have`);
        within(lists.length, applied[i]!, 'applied list', node);
        within(failures.length, failed[i]!, 'failure map', node);
        within(ports.length, reportedCarried[i]!, 'port list', node);
      }
      if (seenTags[i] === trueLength && !hasReport)
        throw new SnapshotContentError(`node ${JSON.stringify(node)}: last seen at a report it does not have`);
      within(lists.length, missing[i]!, 'missing list', node);
      within(ports.length, carried[i]!, 'port list', node);
    }
  }

  function sentOf(i: number): SentSummary | null {
    const digest = s.sentDigest.at(i);
    if (digest === null) return null;
    const ack = s.sentAcknowledgedAt.at(i);
    return {
      digest,
      specDigest: t.specs[s.sentSpec.at(i)]!,
      serial: s.sentSerial.at(i),
      sentAt: s.sentAt.at(i)!,
      resourceIds: lists[s.sentResources.at(i)]!,
      // The same string as the report's time when they are equal, as the fold holds them.
      acknowledgedAt: ack === true ? s.receivedAt.at(i)! : ack,
    };
  }

  function state(i: number): NodeState {
    const node = nodes[i]!;
    const sent = sentOf(i);
    const receivedAt = s.receivedAt.at(i);
    let reported: ReportedSummary | null = null;
    if (receivedAt !== null) {
      const declared = s.declared.at(i);
      reported = {
        declared: declared === true ? sent!.digest : declared,
        receivedAt,
        applied: lists[s.applied.at(i)]!,
        failed: failures[s.failed.at(i)]!,
        refused: s.refused.at(i),
        carried: ports[s.reportedCarried.at(i)]!,
        class: reportClasses[s.class.at(i)]!,
      };
    }
    const stale = s.stale.at(i);
    const unknown = s.unknown.at(i);
    const undeclared = s.undeclared.at(i);
    const lastLatencyMs = s.lastLatencyMs.at(i);
    const recent = s.recentLatenciesMs.at(i);
    const acknowledged = s.acknowledged.at(i);
    const superseded = s.superseded.at(i);
    const earlier = s.earlierSends.at(i);
    const seen = s.lastSeenAt.at(i);
    return {
      node,
      status: nodeStatuses[s.status.at(i)]!,
      caughtUp: s.caughtUp.at(i),
      sent,
      reported,
      missing: lists[s.missing.at(i)]!,
      carried: ports[s.carried.at(i)]!,
      lastSeenAt: seen === true ? receivedAt : seen,
      retiredAt: s.retiredAt.at(i),
      anomalies: stale === 0 && unknown === 0 && undeclared === 0 ? noAnomalies : { stale, unknown, undeclared },
      convergence:
        lastLatencyMs === null && recent.length === 0 && acknowledged === 0 && superseded === 0
          ? convergenceZero
          : { lastLatencyMs, recentLatenciesMs: recent.length === 0 ? none : recent, acknowledged, superseded },
      earlierSends: earlier.length === 0 ? none : (earlier as EarlierSend[]),
      reports: s.reports.at(i),
      lastReportId: s.lastReportId.at(i),
      position: toBig(s.position.at(i)),
      revision: toBig(s.revision.at(i)),
    };
  }

  // The counters' view, refilled in place: no object per node (lastLatencyMs is not counted).
  const latencies: number[] = [];
  const countedSent = { specDigest: '' };
  const counted = {
    status: 'undeclared' as NodeStatus,
    caughtUp: false,
    sent: null as { specDigest: string } | null,
    retiredAt: null as string | null,
    convergence: { recentLatenciesMs: none as readonly number[], acknowledged: 0, superseded: 0 },
    anomalies: { stale: 0, unknown: 0, undeclared: 0 },
  };
  const recent = s.recentLatenciesMs;
  function countedAt(i: number): CountedState {
    counted.status = nodeStatuses[status[i]!]!;
    counted.caughtUp = caughtUp[i]!;
    counted.retiredAt = s.retiredAt.at(i);
    if (sentTags[i] === nullLength) counted.sent = null;
    else {
      countedSent.specDigest = t.specs[sentSpec[i]!]!;
      counted.sent = countedSent;
    }
    const c = counted.convergence;
    if (recent instanceof NumberListColumn) {
      // Refilled in place: a list per node (16 latencies once its history is full) made the
      // restore's cost grow with each node's bounded state.
      const n = recent.counts[i]!;
      if (n === 0) c.recentLatenciesMs = none;
      else {
        const from = recent.starts[i]!;
        latencies.length = 0;
        for (let k = 0; k < n; k++) latencies.push(recent.flat[from + k]!);
        c.recentLatenciesMs = latencies;
      }
    } else c.recentLatenciesMs = recent.at(i);
    c.acknowledged = acknowledged[i]!;
    c.superseded = superseded[i]!;
    const a = counted.anomalies;
    a.stale = stale[i]!;
    a.unknown = unknown[i]!;
    a.undeclared = undeclared[i]!;
    return counted as unknown as CountedState;
  }

  const facts: StateFacts = {
    status: 'undeclared',
    caughtUp: false,
    sent: false,
    reported: false,
    declaredIsSent: false,
    refused: false,
    resources: -1,
    applied: -1,
    failed: -1,
    missing: none,
    carried: none,
    reportedCarried: none,
    reports: 0,
    position: 0,
  };
  const refusedLengths = s.refused instanceof TextColumn ? s.refused.lengths : null;
  const position = valuesOf(s.position);
  function factsAt(i: number): StateFacts {
    facts.status = nodeStatuses[status[i]!]!;
    facts.caughtUp = caughtUp[i]!;
    facts.sent = sentTags[i] !== nullLength;
    facts.reported = receivedTags[i] !== nullLength;
    facts.resources = facts.sent ? sentResources[i]! : -1;
    if (facts.reported) {
      const declared = declaredTags[i]!;
      // `true` is the send's digest; a digest written out is compared as a string (a stale report, or a file not of this writer).
      facts.declaredIsSent = facts.sent && (declared === trueLength || (declared >= 0 && s.declared.at(i) === s.sentDigest.at(i)));
      facts.refused = refusedLengths === null ? s.refused.at(i) !== '' : refusedLengths[i]! > 0;
      facts.applied = applied[i]!;
      facts.failed = failed[i]!;
      facts.reportedCarried = ports[reportedCarried[i]!]!;
    } else {
      facts.declaredIsSent = false;
      facts.refused = false;
      facts.applied = -1;
      facts.failed = -1;
      facts.reportedCarried = none;
    }
    facts.missing = lists[missing[i]!]!;
    facts.carried = ports[carried[i]!]!;
    facts.reports = reports[i]!;
    facts.position = position[i]!;
    return facts;
  }

  const lastSeenMs = (i: number): number => {
    const tag = seenTags[i];
    if (tag === nullLength) return NaN;
    return tag === trueLength ? timeOf(s.receivedAt, i) : timeOf(s.lastSeenAt, i);
  };

  return {
    length: n,
    nodes,
    slots,
    state,
    status: (i) => nodeStatuses[status[i]!]!,
    lastSeenMs,
    counted: countedAt,
    facts: factsAt,
  };
}
