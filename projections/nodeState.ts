import type { AliveSeenData, DeclarationSentData, Recorded, ReportReceivedData } from '../src/events/index.ts';

// The fold of DESIGN §3: one node's stream, in order, into the state that answers "has this
// node read the latest words we sent it?". Pure and deterministic: the live engine and a replay
// from zero call the same function, and "as of T or P" is this fold stopped early.
//
// caughtUp is an equality of digests — the latest report names the digest of the latest send —
// and never a comparison of clocks. Times are carried only as facts for people (latency, age).

/** DESIGN §3's statuses, as a list: the API's schemas and the CLI's filters are built from it. */
export const nodeStatuses = ['undeclared', 'behind', 'refused', 'degraded', 'converged'] as const;
export type NodeStatus = (typeof nodeStatuses)[number];

/** How a report relates to what had been sent when it was folded. */
export const reportClasses = ['matching', 'stale', 'unknown', 'undeclared'] as const;
export type ReportClass = (typeof reportClasses)[number];

export type SentSummary = Readonly<{
  digest: string;
  /** Digest of the resources alone (DESIGN §2): the same for every node sent the same spec. */
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
  /** Every digest sent to this node, with its serial: how a report is told stale from unknown. */
  sentDigests: ReadonlyMap<string, number>;
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

export const initialNodeState = (node: string): NodeState => ({
  node,
  status: 'undeclared',
  caughtUp: false,
  sent: null,
  reported: null,
  missing: [],
  carried: [],
  lastSeenAt: null,
  anomalies: { stale: 0, unknown: 0, undeclared: 0 },
  convergence: { lastLatencyMs: null, recentLatenciesMs: [], acknowledged: 0, superseded: 0 },
  sentDigests: new Map(),
  reports: 0,
  lastReportId: null,
  position: -1n,
  revision: -1n,
});

// Engine-written times are all Date#toISOString (24 chars, UTC), which order as strings; only
// other shapes need parsing. Replaying alive-heavy streams spent most of its time in Date.parse.
const isoOrder = (s: string): boolean => s.length === 24 && s.charCodeAt(23) === 0x5a && s.charCodeAt(10) === 0x54;
const later = (a: string | null, b: string): string => {
  if (a === null) return b;
  if (isoOrder(a) && isoOrder(b)) return b > a ? b : a;
  return Date.parse(b) > Date.parse(a) ? b : a;
};

/** Classify a report against what had been sent to this node so far. */
export function classifyReport(state: Pick<NodeState, 'sent' | 'sentDigests'>, declared: string | null): ReportClass {
  if (declared === null) return 'undeclared';
  if (state.sent !== null && state.sent.digest === declared) return 'matching';
  return state.sentDigests.has(declared) ? 'stale' : 'unknown';
}

/** Status from the latest send and the latest report (DESIGN §3). */
function statusOf(
  sent: SentSummary | null,
  reported: ReportedSummary | null,
): { status: NodeStatus; caughtUp: boolean; missing: readonly string[] } {
  if (sent === null) return { status: 'undeclared', caughtUp: false, missing: [] };
  const caughtUp = reported !== null && reported.declared === sent.digest;
  if (!caughtUp || reported === null) return { status: 'behind', caughtUp: false, missing: [] };
  if (reported.refused !== '') return { status: 'refused', caughtUp, missing: [] };
  const applied = new Set(reported.applied);
  const missing = sent.resourceIds.filter((id) => !applied.has(id) && !Object.hasOwn(reported.failed, id));
  const degraded = missing.length > 0 || Object.keys(reported.failed).length > 0;
  return { status: degraded ? 'degraded' : 'converged', caughtUp, missing };
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
  return {
    sent,
    sentDigests: new Map(s.sentDigests).set(d.digest, d.serial),
    ...statusOf(sent, s.reported),
    convergence: superseded === 0 ? s.convergence : { ...s.convergence, superseded: s.convergence.superseded + superseded },
  };
}

function onReportReceived(s: NodeState, d: ReportReceivedData, id: string): Changes | null {
  if (id === s.lastReportId) return null;
  const cls = classifyReport(s, d.declared);
  const reported: ReportedSummary = {
    declared: d.declared,
    receivedAt: d.receivedAt,
    applied: d.applied,
    failed: d.failed,
    refused: d.refused,
    carried: d.carried,
    class: cls,
  };
  let { sent, convergence } = s;
  if (cls === 'matching' && sent !== null && sent.acknowledgedAt === null) {
    const latency = Math.max(0, Date.parse(d.receivedAt) - Date.parse(sent.sentAt));
    sent = { ...sent, acknowledgedAt: d.receivedAt };
    const recentLatenciesMs = [...convergence.recentLatenciesMs.slice(1 - recentLatencyLimit), latency];
    convergence = { ...convergence, lastLatencyMs: latency, recentLatenciesMs, acknowledged: convergence.acknowledged + 1 };
  }
  return {
    sent,
    reported,
    ...statusOf(sent, reported),
    carried: d.carried,
    lastSeenAt: later(s.lastSeenAt, d.receivedAt),
    anomalies: cls === 'matching' ? s.anomalies : { ...s.anomalies, [cls]: s.anomalies[cls] + 1 },
    convergence,
    reports: s.reports + 1,
    lastReportId: id,
  };
}

function onAliveSeen(s: NodeState, d: AliveSeenData): Changes | null {
  const lastSeenAt = later(s.lastSeenAt, d.seenAt);
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
      changes = onReportReceived(state, event.data, event.id);
      break;
    case 'AliveSeen':
      changes = onAliveSeen(state, event.data);
      break;
    default:
      // A rollout's event (issue 14) lives in its own stream and says nothing about a node.
      return state;
  }
  // Position and revision advance even when the event changes nothing else (a duplicate report).
  const position = event.position > state.position ? event.position : state.position;
  const revision = event.revision > state.revision ? event.revision : state.revision;
  if (changes === null && position === state.position && revision === state.revision) return state;
  return { ...state, ...changes, position, revision };
}

/** Fold a node's events from its initial state (or from `from`, to continue a fold). */
export function foldNodeEvents(node: string, events: Iterable<Recorded>, from: NodeState = initialNodeState(node)): NodeState {
  let s = from;
  for (const e of events) s = foldNode(s, e);
  return s;
}
