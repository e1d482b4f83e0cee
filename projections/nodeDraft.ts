import type { Recorded } from '../src/events/index.ts';
import { later, noAnomalies, noConvergence, noFailures, none, sendHistoryLimit, recentLatencyLimit, statusOf } from './nodeState.ts';
import type { Anomalies, EarlierSend, NodeState, ReportClass, ReportedSummary, SentSummary } from './nodeState.ts';

// The fold of nodeState.ts on a private, mutable working state, for the paths that fold many
// events before anyone reads the result: a replay from zero (`replay --verify`), a catch-up.
// foldNode builds a new state per event (and a new summary per report), which on a 1,000,000-event
// replay meant a young-generation GC every ~8,000 events and ~1 µs of fold per event
// (bench/replay.ts). A draft takes each event in place and builds the immutable NodeState only
// when asked (`publishDraft`), so a replay allocates states per node, not per event.
//
// The contract is foldNode's: for every history, publishDraft of the drafted fold is deep-equal
// to foldNodeEvents of the same events (test/projections/nodeDraft.property.test.ts holds the two
// equal on arbitrary histories, duplicates and out-of-order positions included). It changes no
// result, so foldVersion stays. Status, caughtUp, missing and carried are functions of the latest
// send and report alone (statusOf), so the draft computes them once, when it publishes.

/** What a send leaves in the state: a SentSummary's fields (the event's data has them all). */
type SentFields = Pick<SentSummary, 'digest' | 'specDigest' | 'serial' | 'sentAt' | 'resourceIds'>;
/** What a report leaves in the state: a ReportedSummary's fields but its class. */
type ReportFields = Pick<ReportedSummary, 'declared' | 'receivedAt' | 'applied' | 'failed' | 'refused' | 'carried'>;

/** A node's working state. Owned by one fold: never hand it out, publish it. */
export type NodeDraft = {
  readonly node: string;
  sent: SentFields | null;
  acknowledgedAt: string | null;
  /** Digests and serials of the sends before the latest, oldest first (at most sendHistoryLimit − 1). */
  earlierDigests: string[];
  earlierSerials: number[];
  report: ReportFields | null;
  reportClass: ReportClass;
  lastSeenAt: string | null;
  stale: number;
  unknown: number;
  undeclared: number;
  lastLatencyMs: number | null;
  latencies: number[];
  acknowledged: number;
  superseded: number;
  reports: number;
  lastReportId: string | null;
  position: bigint;
  revision: bigint;
  /** The state last published, while nothing has changed since (publishing again hands it back). */
  published: NodeState | null;
  /** Published parts still current: the same objects are handed out again, as foldNode shares them. */
  sentSummary: SentSummary | null;
  reportedSummary: ReportedSummary | null;
  earlierSends: readonly EarlierSend[] | null;
  convergence: NodeState['convergence'] | null;
  anomalies: Anomalies | null;
};

/** A draft at the initial state of `node` (initialNodeState). */
export function createNodeDraft(node: string): NodeDraft {
  return {
    node,
    sent: null,
    acknowledgedAt: null,
    earlierDigests: [],
    earlierSerials: [],
    report: null,
    reportClass: 'undeclared',
    lastSeenAt: null,
    stale: 0,
    unknown: 0,
    undeclared: 0,
    lastLatencyMs: null,
    latencies: [],
    acknowledged: 0,
    superseded: 0,
    reports: 0,
    lastReportId: null,
    position: -1n,
    revision: -1n,
    published: null,
    sentSummary: null,
    reportedSummary: null,
    earlierSends: none,
    convergence: noConvergence,
    anomalies: noAnomalies,
  };
}

/** A draft that continues from `state` (a snapshot, a published checkpoint). */
export function draftOf(state: NodeState): NodeDraft {
  const c = state.convergence;
  return {
    node: state.node,
    sent: state.sent,
    acknowledgedAt: state.sent?.acknowledgedAt ?? null,
    earlierDigests: state.earlierSends.map((e) => e[0]),
    earlierSerials: state.earlierSends.map((e) => e[1]),
    report: state.reported,
    reportClass: state.reported?.class ?? 'undeclared',
    lastSeenAt: state.lastSeenAt,
    stale: state.anomalies.stale,
    unknown: state.anomalies.unknown,
    undeclared: state.anomalies.undeclared,
    lastLatencyMs: c.lastLatencyMs,
    latencies: [...c.recentLatenciesMs],
    acknowledged: c.acknowledged,
    superseded: c.superseded,
    reports: state.reports,
    lastReportId: state.lastReportId,
    position: state.position,
    revision: state.revision,
    published: state,
    sentSummary: state.sent,
    reportedSummary: state.reported,
    earlierSends: state.earlierSends,
    convergence: c,
    anomalies: state.anomalies,
  };
}

/** Fold one event into the draft, in place: foldNode's rules (nodeState.ts), field by field. */
export function foldIntoDraft(d: NodeDraft, event: Recorded): void {
  switch (event.type) {
    case 'DeclarationSent': {
      const prev = d.sent;
      if (prev !== null) {
        if (d.acknowledgedAt === null) {
          d.superseded++;
          d.convergence = null;
        }
        if (d.earlierDigests.length >= sendHistoryLimit - 1) {
          d.earlierDigests.shift();
          d.earlierSerials.shift();
        }
        d.earlierDigests.push(prev.digest);
        d.earlierSerials.push(prev.serial);
        d.earlierSends = null;
      }
      // The fields a state keeps, not the event's data: holding that (declaration bytes, signature,
      // key id) until the node's next send made every young-generation GC of a replay copy it.
      const x = event.data;
      d.sent = { digest: x.digest, specDigest: x.specDigest, serial: x.serial, sentAt: x.sentAt, resourceIds: x.resourceIds };
      d.acknowledgedAt = null;
      d.sentSummary = null;
      break;
    }
    case 'ReportReceived': {
      if (event.id === d.lastReportId) break;
      const r = event.data;
      const cls = reportClass(d, r.declared);
      // Likewise a report's own fields (not its transport), with what the published summary shares
      // taken already: the sent digest it matches, the sent ids it repeats, the empty constants.
      const sentIds = d.sent?.resourceIds;
      d.report = {
        declared: cls === 'matching' ? d.sent!.digest : r.declared,
        receivedAt: r.receivedAt,
        applied: sentIds !== undefined && sameItems(r.applied, sentIds) ? sentIds : r.applied,
        failed: hasKeys(r.failed) ? r.failed : noFailures,
        refused: r.refused,
        carried: r.carried.length === 0 ? none : r.carried,
      };
      d.reportClass = cls;
      d.reportedSummary = null;
      if (cls === 'matching') {
        if (d.acknowledgedAt === null) {
          const latency = Math.max(0, Date.parse(r.receivedAt) - Date.parse(d.sent!.sentAt));
          d.acknowledgedAt = r.receivedAt;
          d.sentSummary = null;
          d.lastLatencyMs = latency;
          if (d.latencies.length >= recentLatencyLimit) d.latencies.shift();
          d.latencies.push(latency);
          d.acknowledged++;
          d.convergence = null;
        }
      } else {
        if (cls === 'stale') d.stale++;
        else if (cls === 'unknown') d.unknown++;
        else d.undeclared++;
        d.anomalies = null;
      }
      d.lastSeenAt = later(d.lastSeenAt, r.receivedAt);
      d.reports++;
      d.lastReportId = event.id;
      break;
    }
    case 'AliveSeen': {
      const seen = later(d.lastSeenAt, event.data.seenAt);
      // Equal text is the same value: only a later time is a change.
      if (seen === d.lastSeenAt) {
        if (event.position <= d.position && event.revision <= d.revision) return;
      } else d.lastSeenAt = seen;
      break;
    }
    default:
      // A rollout's event (issue 14) says nothing about a node, and moves nothing (foldNode).
      return;
  }
  if (event.position > d.position) d.position = event.position;
  if (event.revision > d.revision) d.revision = event.revision;
  d.published = null;
}

/** nodeState.ts's classifyReport, on the draft's own fields. */
function reportClass(d: NodeDraft, declared: string | null): ReportClass {
  if (declared === null) return 'undeclared';
  if (d.sent !== null && d.sent.digest === declared) return 'matching';
  const digests = d.earlierDigests;
  for (let i = 0; i < digests.length; i++) if (digests[i] === declared) return 'stale';
  return 'unknown';
}

const sameItems = <T>(a: readonly T[], b: readonly T[] | undefined): boolean => {
  if (b === undefined || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
};

/** The immutable state the draft stands for: deep-equal to what foldNode would have returned. */
export function publishDraft(d: NodeDraft): NodeState {
  if (d.published !== null) return d.published;
  const s = d.sent;
  let sent = d.sentSummary;
  if (sent === null && s !== null) {
    sent = {
      digest: s.digest,
      specDigest: s.specDigest,
      serial: s.serial,
      sentAt: s.sentAt,
      resourceIds: s.resourceIds,
      acknowledgedAt: d.acknowledgedAt,
    };
    d.sentSummary = sent;
  }
  const r = d.report;
  let reported = d.reportedSummary;
  if (reported === null && r !== null) {
    // foldNode shares arrays the state already holds when a report repeats them: equal values.
    const sentIds = sent?.resourceIds;
    reported = {
      declared: r.declared,
      receivedAt: r.receivedAt,
      applied: sentIds !== undefined && sameItems(r.applied, sentIds) ? sentIds : r.applied,
      failed: hasKeys(r.failed) ? r.failed : noFailures,
      refused: r.refused,
      carried: r.carried,
      class: d.reportClass,
    };
    d.reportedSummary = reported;
  }
  let earlierSends = d.earlierSends;
  if (earlierSends === null) {
    const n = d.earlierDigests.length;
    const out = new Array<EarlierSend>(n);
    for (let i = 0; i < n; i++) out[i] = [d.earlierDigests[i]!, d.earlierSerials[i]!] as const;
    earlierSends = d.earlierSends = out;
  }
  let convergence = d.convergence;
  if (convergence === null) {
    convergence = d.convergence = {
      lastLatencyMs: d.lastLatencyMs,
      recentLatenciesMs: d.latencies.length === 0 ? none : d.latencies.slice(),
      acknowledged: d.acknowledged,
      superseded: d.superseded,
    };
  }
  let anomalies = d.anomalies;
  if (anomalies === null) anomalies = d.anomalies = { stale: d.stale, unknown: d.unknown, undeclared: d.undeclared };
  const { status, caughtUp, missing } = statusOf(sent, reported);
  const state: NodeState = {
    node: d.node,
    status,
    caughtUp,
    sent,
    reported,
    missing,
    carried: reported === null ? none : reported.carried,
    lastSeenAt: d.lastSeenAt,
    anomalies,
    convergence,
    earlierSends,
    reports: d.reports,
    lastReportId: d.lastReportId,
    position: d.position,
    revision: d.revision,
  };
  d.published = state;
  return state;
}

function hasKeys(o: Readonly<Record<string, string>>): boolean {
  for (const k in o) if (Object.hasOwn(o, k)) return true;
  return false;
}
