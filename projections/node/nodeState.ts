import { isoMs } from '../../src/core/events/index.ts';
import type { AliveSeenData, DeclarationSentData, Recorded, ReportReceivedData } from '../../src/core/events/index.ts';

/** What ingest found in the store of a digest older than the kept history (ReportReceived's `sentEarlier`). */
export type SentEarlier = ReportReceivedData['sentEarlier'];

// The fold of docs/design.md §3: one node's stream, in order, into the state that answers "has this
// node read the latest words we sent it?". Pure and deterministic: the live engine and a replay
// from zero call the same function, and "as of T or P" is this fold stopped early.
//
// caughtUp is an equality of digests — the latest report names the digest of the latest send —
// and never a comparison of clocks. Times are carried only as facts for people (latency, age).

/** docs/design.md §3's statuses, as a list: the API's schemas and the CLI's filters are built from it. */
export const nodeStatuses = ['undeclared', 'behind', 'refused', 'degraded', 'converged'] as const;
export type NodeStatus = (typeof nodeStatuses)[number];

/** How a report relates to what had been sent when it was folded. */
export const reportClasses = ['matching', 'stale', 'unknown', 'undeclared'] as const;
export type ReportClass = (typeof reportClasses)[number];

export type SentSummary = Readonly<{
  digest: string;
  /** Digest of the resources alone (docs/design.md §2): the same for every node sent the same spec. */
  specDigest: string;
  serial: number;
  sentAt: string;
  resourceIds: readonly string[];
  /** When the first report naming this digest arrived while it was the latest send. */
  acknowledgedAt: string | null;
}>;

export type ReportedSummary = Readonly<{
  declared: string | null;
  receivedAt: string;
  applied: readonly string[];
  failed: Readonly<Record<string, string>>;
  refused: string;
  carried: readonly number[];
  /** Classification at the moment it was folded. */
  class: ReportClass;
}>;

export type Anomalies = Readonly<{ stale: number; unknown: number; undeclared: number }>;

export type NodeState = Readonly<{
  node: string;
  status: NodeStatus;
  caughtUp: boolean;
  sent: SentSummary | null;
  reported: ReportedSummary | null;
  /** Resources of the latest declaration that the latest (matching) report neither applied nor failed. */
  missing: readonly string[];
  /** Ports the host raised itself (latest report's `carried`); a send may not assign them. */
  carried: readonly number[];
  /** Latest sign of life: an AliveSeen or a report, whichever is newer. */
  lastSeenAt: string | null;
  /**
   * When the node was retired (NodeRetired's `at`), or null: a retired node is out of the fleet's
   * views and counts until a later send brings it back (docs/design.md §3 "Retired nodes").
   */
  retiredAt: string | null;
  anomalies: Anomalies;
  convergence: Readonly<{
    /** Latency of the latest acknowledged declaration, send → first matching report. */
    lastLatencyMs: number | null;
    /** The most recent latencies (at most `recentLatencyLimit`), oldest first, for fleet percentiles. */
    recentLatenciesMs: readonly number[];
    acknowledged: number;
    /** Declarations replaced by a newer send before any report named them. */
    superseded: number;
  }>;
  /**
   * The sends before the latest, newest last, as [digest, serial]: at most `sendHistoryLimit` − 1
   * of them (the latest is `sent`). How a report is told stale from unknown; for a digest older than
   * this window the report's own `sentEarlier` decides (classifyReport; docs/design.md "Bounded send history").
   */
  earlierSends: readonly EarlierSend[];
  reports: number;
  /** Id of the last report folded: a duplicate delivery of the same event changes nothing. */
  lastReportId: string | null;
  /** Position of the last event folded (64-bit; a decimal string outside). */
  position: bigint;
  /** Revision of the last event folded in the node's stream (-1n: none): the expected revision of the next send. */
  revision: bigint;
}>;

/** Bounded so a node's state stays small however long it lives (memory per 10,000 nodes is measured). */
export const recentLatencyLimit = 16;

/**
 * Sends whose digests a node's state keeps, the latest included: its size does not grow with its
 * age. A report naming an older one is told stale from unknown by the fact ingest recorded in it
 * (ReportReceived's `sentEarlier`, looked up in the store); a report stored before ingest recorded
 * that fact counts as `unknown`, as it always did. Unbounded, the history was a Map per node
 * (~200 B for one entry) and grew with every send.
 */
export const sendHistoryLimit = 8;

export type EarlierSend = readonly [digest: string, serial: number];

// Shared by every state that has nothing there: one object instead of one per node (the read
// model's heap at 100,000 nodes is measured by bench/scale.ts). Frozen, as every state is read-only.
export const none: readonly never[] = Object.freeze([]);
export const noFailures: Readonly<Record<string, string>> = Object.freeze({});
export const noAnomalies: Anomalies = Object.freeze({ stale: 0, unknown: 0, undeclared: 0 });
export const noConvergence: NodeState['convergence'] = Object.freeze({
  lastLatencyMs: null,
  recentLatenciesMs: none,
  acknowledged: 0,
  superseded: 0,
});

export const initialNodeState = (node: string): NodeState => ({
  node,
  status: 'undeclared',
  caughtUp: false,
  sent: null,
  reported: null,
  missing: none,
  carried: none,
  lastSeenAt: null,
  retiredAt: null,
  anomalies: noAnomalies,
  convergence: noConvergence,
  earlierSends: none,
  reports: 0,
  lastReportId: null,
  position: -1n,
  revision: -1n,
});

// Engine-written times are all Date#toISOString (24 chars, UTC), which order as strings; only
// other shapes need parsing. Replaying alive-heavy streams spent most of its time in Date.parse.
const isoOrder = (s: string): boolean => s.length === 24 && s.charCodeAt(23) === 0x5a && s.charCodeAt(10) === 0x54;
/** The later of two times: `a` unless `b` is strictly later (the first text of an instant stays). */
export const later = (a: string | null, b: string): string => {
  if (a === null) return b;
  if (isoOrder(a) && isoOrder(b)) return b > a ? b : a;
  return Date.parse(b) > Date.parse(a) ? b : a;
};

/** Date.parse, by isoMs for the engine's own times (Date#toISOString's: a few comparisons). */
const parseTime = (text: string): number => {
  const ms = isoMs(text);
  return ms === ms ? ms : Date.parse(text);
};

/** The earlier send with this digest, if the state still keeps it. */
const earlierSend = (state: Pick<NodeState, 'earlierSends'>, digest: string): EarlierSend | undefined => {
  for (const e of state.earlierSends) if (e[0] === digest) return e;
  return undefined;
};

/**
 * Classify a report against what had been sent to this node so far: the kept history first, then
 * what ingest recorded of an older digest (`sentEarlier`: absent on reports stored before it did,
 * which count as unknown as they always did).
 */
export function classifyReport(
  state: Pick<NodeState, 'sent' | 'earlierSends'>,
  declared: string | null,
  sentEarlier?: SentEarlier,
): ReportClass {
  if (declared === null) return 'undeclared';
  if (state.sent !== null && state.sent.digest === declared) return 'matching';
  if (earlierSend(state, declared) !== undefined) return 'stale';
  return sentEarlier === undefined || sentEarlier === null ? 'unknown' : 'stale';
}

/** The serial of a digest sent to this node: the latest, a kept earlier send, or what ingest recorded (`sentEarlier`). */
export function serialOfSent(state: Pick<NodeState, 'sent' | 'earlierSends'>, digest: string, sentEarlier?: SentEarlier): number | null {
  if (state.sent !== null && state.sent.digest === digest) return state.sent.serial;
  return earlierSend(state, digest)?.[1] ?? sentEarlier?.serial ?? null;
}

const sameItems = <T>(a: readonly T[], b: readonly T[] | undefined): boolean => {
  if (b === undefined || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
};

/** Status from the latest send and the latest report (docs/design.md §3). */
export function statusOf(
  sent: SentSummary | null,
  reported: ReportedSummary | null,
): { status: NodeStatus; caughtUp: boolean; missing: readonly string[] } {
  if (sent === null) return { status: 'undeclared', caughtUp: false, missing: none };
  const caughtUp = reported !== null && reported.declared === sent.digest;
  if (!caughtUp || reported === null) return { status: 'behind', caughtUp: false, missing: none };
  if (reported.refused !== '') return { status: 'refused', caughtUp, missing: none };
  let failures = 0;
  for (const k in reported.failed) if (Object.hasOwn(reported.failed, k)) failures++;
  // Most reports apply exactly what was sent (and then share its array): nothing can be missing.
  if (reported.applied === sent.resourceIds) return { status: failures > 0 ? 'degraded' : 'converged', caughtUp, missing: none };
  const missing = sent.resourceIds.filter((id) => !reported.applied.includes(id) && !Object.hasOwn(reported.failed, id));
  const degraded = missing.length > 0 || failures > 0;
  return { status: degraded ? 'degraded' : 'converged', caughtUp, missing: missing.length === 0 ? none : missing };
}

// Each handler returns only the fields its event changes; foldNode builds the next state in one
// object. Spreading the whole state twice per event (once per handler, once for the position)
// was most of the fold's cost on a 1,000,000-event replay (bench/replay.ts).
type Changes = Partial<{ -readonly [K in keyof NodeState]: NodeState[K] }>;

function onDeclarationSent(s: NodeState, d: DeclarationSentData): Changes {
  const superseded = s.sent !== null && s.sent.acknowledgedAt === null ? 1 : 0;
  const sent: SentSummary = {
    digest: d.digest,
    specDigest: d.specDigest,
    serial: d.serial,
    sentAt: d.sentAt,
    resourceIds: d.resourceIds,
    acknowledgedAt: null,
  };
  const c = s.convergence;
  return {
    sent,
    earlierSends:
      s.sent === null ? s.earlierSends : appendBounded(s.earlierSends, [s.sent.digest, s.sent.serial] as const, sendHistoryLimit - 1),
    ...statusOf(sent, s.reported),
    // A send is the operator speaking to the node again: it is back in the fleet.
    ...(s.retiredAt === null ? {} : { retiredAt: null }),
    convergence:
      superseded === 0
        ? c
        : {
            lastLatencyMs: c.lastLatencyMs,
            recentLatenciesMs: c.recentLatenciesMs,
            acknowledged: c.acknowledged,
            superseded: c.superseded + 1,
          },
  };
}

/**
 * A report's next state, built in one object literal (or `s` itself for a repeat of the last
 * report that moves nothing). Reports are most of what is folded, and going through Changes —
 * a partial object with statusOf's result spread into it, then copied field by field into the
 * state by withChanges — made two objects and a spread per report.
 * The fields are withChanges' for a report (micro-bench of 50,000 reports over 10,000 nodes:
 * 0.7 → 0.5 µs a fold); test/projections/node/nodeStateFast.property.test.ts holds foldNode to the
 * independent draft fold on hostile histories (duplicate ids, positions that repeat or step back).
 */
function onReportReceived(s: NodeState, d: ReportReceivedData, id: string, position: bigint, revision: bigint): NodeState {
  if (id === s.lastReportId) {
    if (position === s.position && revision === s.revision) return s;
    return withChanges(s, {}, position, revision);
  }
  const cls = classifyReport(s, d.declared, d.sentEarlier);
  // The same values, as objects the state already holds where it can: a report that names the
  // latest digest, applies what was sent and carries what it carried before adds no new strings
  // or arrays to the read model (memory per node, bench/scale.ts). Equal values, so the fold's
  // result is the same; only sharing changes.
  const sentIds = s.sent?.resourceIds;
  const reported: ReportedSummary = {
    declared: cls === 'matching' ? s.sent!.digest : cls === 'stale' ? (earlierSend(s, d.declared!)?.[0] ?? d.declared) : d.declared,
    receivedAt: d.receivedAt,
    applied: sameItems(d.applied, sentIds) ? sentIds! : sameItems(d.applied, s.reported?.applied) ? s.reported!.applied : d.applied,
    failed: Object.keys(d.failed).length === 0 ? noFailures : d.failed,
    refused: d.refused,
    carried: sameItems(d.carried, s.carried) ? s.carried : d.carried,
    class: cls,
  };
  let { sent, convergence } = s;
  if (cls === 'matching' && sent !== null && sent.acknowledgedAt === null) {
    const latency = Math.max(0, parseTime(d.receivedAt) - parseTime(sent.sentAt));
    sent = {
      digest: sent.digest,
      specDigest: sent.specDigest,
      serial: sent.serial,
      sentAt: sent.sentAt,
      resourceIds: sent.resourceIds,
      acknowledgedAt: d.receivedAt,
    };
    convergence = {
      lastLatencyMs: latency,
      recentLatenciesMs: appendBounded(convergence.recentLatenciesMs, latency, recentLatencyLimit),
      acknowledged: convergence.acknowledged + 1,
      superseded: convergence.superseded,
    };
  }
  const status = statusOf(sent, reported);
  return {
    node: s.node,
    status: status.status,
    caughtUp: status.caughtUp,
    sent,
    reported,
    missing: status.missing,
    carried: reported.carried,
    lastSeenAt: later(s.lastSeenAt, d.receivedAt),
    retiredAt: s.retiredAt,
    anomalies: cls === 'matching' ? s.anomalies : counted(s.anomalies, cls),
    convergence,
    earlierSends: s.earlierSends,
    reports: s.reports + 1,
    lastReportId: id,
    position,
    revision,
  };
}

function onAliveSeen(s: NodeState, d: AliveSeenData): Changes | null {
  return onSeen(s, d.seenAt);
}

function onSeen(s: NodeState, at: string): Changes | null {
  const lastSeenAt = later(s.lastSeenAt, at);
  return lastSeenAt === s.lastSeenAt ? null : { lastSeenAt };
}

/** (state, event) → state. Never throws on a well-typed event; never mutates its input. */
export function foldNode(state: NodeState, event: Recorded): NodeState {
  let changes: Changes | null;
  switch (event.type) {
    case 'DeclarationSent':
      changes = onDeclarationSent(state, event.data);
      break;
    case 'ReportReceived':
      return onReportReceived(
        state,
        event.data,
        event.id,
        event.position > state.position ? event.position : state.position,
        event.revision > state.revision ? event.revision : state.revision,
      );
    case 'AliveSeen':
      changes = onAliveSeen(state, event.data);
      break;
    // A liveness transition's time is a sign of life like an alive's (docs/design.md §3): the
    // node was heard then. Whether it is connected is read from the transitions themselves
    // (recordedLiveness.ts), not from this time and a reader's grace.
    case 'NodeHeard':
      changes = onSeen(state, event.data.at);
      break;
    case 'NodeSilent':
      changes = onSeen(state, event.data.lastSeenAt);
      break;
    // Retired again while retired keeps the first time: the node left the fleet then.
    case 'NodeRetired':
      changes = state.retiredAt === null ? { retiredAt: event.data.at } : null;
      break;
    default:
      // A rollout's event lives in its own stream and says nothing about a node.
      return state;
  }
  // Position and revision advance even when the event changes nothing else (a duplicate report).
  const position = event.position > state.position ? event.position : state.position;
  const revision = event.revision > state.revision ? event.revision : state.revision;
  if (changes === null && position === state.position && revision === state.revision) return state;
  return withChanges(state, changes ?? {}, position, revision);
}

/**
 * The next state in one object literal, every field named: spreading the state and the changes
 * made V8 build each state with room to spare, and was most of the fold's cost (bench/replay.ts).
 */
const withChanges = (s: NodeState, c: Changes, position: bigint, revision: bigint): NodeState => ({
  node: s.node,
  status: c.status ?? s.status,
  caughtUp: c.caughtUp ?? s.caughtUp,
  sent: c.sent === undefined ? s.sent : c.sent,
  reported: c.reported === undefined ? s.reported : c.reported,
  missing: c.missing ?? s.missing,
  carried: c.carried ?? s.carried,
  lastSeenAt: c.lastSeenAt === undefined ? s.lastSeenAt : c.lastSeenAt,
  retiredAt: c.retiredAt === undefined ? s.retiredAt : c.retiredAt,
  anomalies: c.anomalies ?? s.anomalies,
  convergence: c.convergence ?? s.convergence,
  earlierSends: c.earlierSends ?? s.earlierSends,
  reports: c.reports ?? s.reports,
  lastReportId: c.lastReportId === undefined ? s.lastReportId : c.lastReportId,
  position,
  revision,
});

/** `list` with `item` after it, keeping the newest `limit`, in an array exactly that long (a pushed array keeps room to grow). */
function appendBounded<T>(list: readonly T[], item: T, limit: number): T[] {
  const keep = Math.min(list.length, limit - 1);
  const out = new Array<T>(keep + 1);
  for (let i = 0; i < keep; i++) out[i] = list[list.length - keep + i]!;
  out[keep] = item;
  return out;
}

const counted = (a: Anomalies, cls: 'stale' | 'unknown' | 'undeclared'): Anomalies => ({
  stale: a.stale + (cls === 'stale' ? 1 : 0),
  unknown: a.unknown + (cls === 'unknown' ? 1 : 0),
  undeclared: a.undeclared + (cls === 'undeclared' ? 1 : 0),
});

/** Fold a node's events from its initial state (or from `from`, to continue a fold). */
export function foldNodeEvents(node: string, events: Iterable<Recorded>, from: NodeState = initialNodeState(node)): NodeState {
  let s = from;
  for (const e of events) s = foldNode(s, e);
  return s;
}
