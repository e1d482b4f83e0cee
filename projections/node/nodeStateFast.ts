import type { Recorded } from '../../src/core/events/index.ts';
import { exactNumber, isoMs, isoText } from '../../src/core/events/index.ts';
import { later, noAnomalies, noConvergence, noFailures, none, sendHistoryLimit, recentLatencyLimit, statusOf } from './nodeState.ts';
import type { Anomalies, EarlierSend, NodeState, ReportClass, ReportedSummary, SentSummary } from './nodeState.ts';

// One file, past the usual size, because it mirrors nodeState.ts's fold case by case and the two
// are read side by side. The fold of nodeState.ts on a private, mutable working state, for the paths that fold many
// events before anyone reads the result: a replay from zero (`replay --verify`), a catch-up.
// foldNode builds a new state per event (and a new summary per report), which on a 1,000,000-event
// replay meant a young-generation GC every ~8,000 events and ~1 µs of fold per event
// (bench/replay.ts). A draft takes each event in place and builds the immutable NodeState only
// when asked (`publishDraft`), so a replay allocates states per node, not per event.
//
// Nor does a draft hold the event's own objects where a number or an object it already holds will
// do: positions and revisions are numbers (exact below 2^53), times are the milliseconds of their
// text when Date#toISOString writes that text back (isoTimeFast.ts; other text is kept as it is), a send's
// fields and a report's are fields of the draft, and a spec digest or id list equal to the one held
// is not replaced. Every young-generation GC copies what the working states point to that is new
// since the last one: with each event's time string, bigints and summary object held, that was
// ~0.6 s of a 1,000,000-event replay over 10,000 nodes, against ~0.1 s for reading the same events.
//
// The contract is foldNode's: for every history, publishDraft of the drafted fold is deep-equal
// to foldNodeEvents of the same events (test/projections/node/nodeStateFast.property.test.ts holds the two
// equal on arbitrary histories, duplicates and out-of-order positions included). It changes no
// result, so foldVersion stays. Status, caughtUp, missing and carried are functions of the latest
// send and report alone (statusOf), so the draft computes them once, when it publishes.
//
// Events come in two ways: as Recorded (foldIntoDraft) or as typed fields (draftSend, draftReport,
// draftAlive: a columnar read, src/store/nodeColumns.ts). foldIntoDraft is those three on the event's fields.

/**
 * A node's working state. Owned by one fold: never hand it out, publish it. A time is two fields:
 * the milliseconds of its text (`…Ms`, the text null) when isoMs reads it, or the text itself (`…Ms`
 * NaN); both NaN and null: none.
 */
export type NodeDraft = {
  readonly node: string;
  /** The latest send's digest (null: nothing sent yet) and its other fields. */
  sentDigest: string | null;
  sentSpec: string;
  sentSerial: number;
  sentAtMs: number;
  sentAtText: string | null;
  sentIds: readonly string[];
  /** When the first report naming the latest send came while it was the latest: none yet, NaN and null. */
  ackMs: number;
  ackText: string | null;
  /** Digests and serials of the sends before the latest, oldest first (at most sendHistoryLimit − 1). */
  earlierDigests: string[];
  earlierSerials: number[];
  /** The latest report's fields (reported: none yet). */
  reported: boolean;
  reportDeclared: string | null;
  reportMs: number;
  reportText: string | null;
  reportApplied: readonly string[];
  reportFailed: Readonly<Record<string, string>>;
  reportRefused: string;
  reportCarried: readonly number[];
  reportClass: ReportClass;
  seenMs: number;
  seenText: string | null;
  /** NodeState.retiredAt, as its text: rare, so kept as the event wrote it. */
  retiredAt: string | null;
  stale: number;
  unknown: number;
  undeclared: number;
  lastLatencyMs: number | null;
  latencies: number[];
  acknowledged: number;
  superseded: number;
  reports: number;
  lastReportId: string | null;
  position: number;
  revision: number;
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
    sentDigest: null,
    sentSpec: '',
    sentSerial: 0,
    sentAtMs: NaN,
    sentAtText: null,
    sentIds: none,
    ackMs: NaN,
    ackText: null,
    earlierDigests: [],
    earlierSerials: [],
    reported: false,
    reportDeclared: null,
    reportMs: NaN,
    reportText: null,
    reportApplied: none,
    reportFailed: noFailures,
    reportRefused: '',
    reportCarried: none,
    reportClass: 'undeclared',
    seenMs: NaN,
    seenText: null,
    retiredAt: null,
    stale: 0,
    unknown: 0,
    undeclared: 0,
    lastLatencyMs: null,
    latencies: [],
    acknowledged: 0,
    superseded: 0,
    reports: 0,
    lastReportId: null,
    position: -1,
    revision: -1,
    published: null,
    sentSummary: null,
    reportedSummary: null,
    earlierSends: none,
    convergence: noConvergence,
    anomalies: noAnomalies,
  };
}

/** `text` as a held time: [ms, null] when isoMs reads it, else [NaN, text]; null: none. */
const msOf = (text: string | null): number => (text === null ? NaN : isoMs(text));
const textUnlessMs = (text: string | null, ms: number): string | null => (ms === ms ? null : text);

/** A draft that continues from `state` (a snapshot, a published checkpoint). */
export function draftOf(state: NodeState): NodeDraft {
  const c = state.convergence;
  const s = state.sent;
  const r = state.reported;
  const sentAtMs = msOf(s?.sentAt ?? null);
  const ackMs = msOf(s?.acknowledgedAt ?? null);
  const reportMs = msOf(r?.receivedAt ?? null);
  const seenMs = msOf(state.lastSeenAt);
  return {
    node: state.node,
    sentDigest: s?.digest ?? null,
    sentSpec: s?.specDigest ?? '',
    sentSerial: s?.serial ?? 0,
    sentAtMs,
    sentAtText: textUnlessMs(s?.sentAt ?? null, sentAtMs),
    sentIds: s?.resourceIds ?? none,
    ackMs,
    ackText: textUnlessMs(s?.acknowledgedAt ?? null, ackMs),
    earlierDigests: state.earlierSends.map((e) => e[0]),
    earlierSerials: state.earlierSends.map((e) => e[1]),
    reported: r !== null,
    reportDeclared: r?.declared ?? null,
    reportMs,
    reportText: textUnlessMs(r?.receivedAt ?? null, reportMs),
    reportApplied: r?.applied ?? none,
    reportFailed: r?.failed ?? noFailures,
    reportRefused: r?.refused ?? '',
    reportCarried: r?.carried ?? none,
    reportClass: r?.class ?? 'undeclared',
    seenMs,
    seenText: textUnlessMs(state.lastSeenAt, seenMs),
    retiredAt: state.retiredAt,
    stale: state.anomalies.stale,
    unknown: state.anomalies.unknown,
    undeclared: state.anomalies.undeclared,
    lastLatencyMs: c.lastLatencyMs,
    latencies: [...c.recentLatenciesMs],
    acknowledged: c.acknowledged,
    superseded: c.superseded,
    reports: state.reports,
    lastReportId: state.lastReportId,
    position: exactNumber(state.position),
    revision: exactNumber(state.revision),
    published: state,
    sentSummary: state.sent,
    reportedSummary: state.reported,
    earlierSends: state.earlierSends,
    convergence: c,
    anomalies: state.anomalies,
  };
}

/**
 * Is the time (bMs, bText) what `later(a, b)` (nodeState.ts) keeps over the held (aMs, aText)?
 * Two times isoMs read compare as their text does; anything else is asked of `later` itself.
 */
function isLater(aMs: number, aText: string | null, bMs: number, bText: string | null): boolean {
  if (aMs === aMs) {
    if (bMs === bMs) return bMs > aMs;
  } else if (aText === null) return true;
  const a = aText ?? isoText(aMs);
  return later(a, bText ?? isoText(bMs)) !== a;
}

/** Date.parse of a held time. */
const parsedMs = (ms: number, text: string | null): number => (ms === ms ? ms : Date.parse(text!));

function moved(d: NodeDraft, position: number, revision: number): void {
  if (position > d.position) d.position = position;
  if (revision > d.revision) d.revision = revision;
  d.published = null;
}

/** A DeclarationSent into the draft; `sentAtText` null when isoMs read the time (`sentAtMs`). */
export function draftSend(
  d: NodeDraft,
  position: number,
  revision: number,
  digest: string,
  specDigest: string,
  serial: number,
  sentAtMs: number,
  sentAtText: string | null,
  resourceIds: readonly string[],
): void {
  if (d.sentDigest !== null) {
    if (d.ackMs !== d.ackMs && d.ackText === null) {
      d.superseded++;
      d.convergence = null;
    }
    if (d.earlierDigests.length >= sendHistoryLimit - 1) {
      d.earlierDigests.shift();
      d.earlierSerials.shift();
    }
    d.earlierDigests.push(d.sentDigest);
    d.earlierSerials.push(d.sentSerial);
    d.earlierSends = null;
  }
  d.sentDigest = digest;
  // Equal values: the one held stays, the event's is left to the young generation.
  if (specDigest !== d.sentSpec) d.sentSpec = specDigest;
  d.sentSerial = serial;
  d.sentAtMs = sentAtMs;
  d.sentAtText = sentAtText;
  if (!sameItems(resourceIds, d.sentIds)) d.sentIds = resourceIds;
  d.ackMs = NaN;
  d.ackText = null;
  d.sentSummary = null;
  d.retiredAt = null;
  moved(d, position, revision);
}

/** A ReportReceived into the draft; `receivedText` null when isoMs read the time (`receivedMs`). */
export function draftReport(
  d: NodeDraft,
  position: number,
  revision: number,
  id: string,
  declared: string | null,
  receivedMs: number,
  receivedText: string | null,
  applied: readonly string[],
  failed: Readonly<Record<string, string>>,
  refused: string,
  carried: readonly number[],
  /** The serial in the report's `sentEarlier` (0: none, or not recorded). */
  sentEarlier: number,
): void {
  if (id !== d.lastReportId) {
    // nodeState.ts's classifyReport, on the draft's own fields; a stale report's digest is the one held.
    let cls: ReportClass;
    let held = declared;
    if (declared === null) cls = 'undeclared';
    else if (d.sentDigest !== null && d.sentDigest === declared) {
      cls = 'matching';
      held = d.sentDigest;
    } else {
      cls = 'unknown';
      const digests = d.earlierDigests;
      for (let i = 0; i < digests.length; i++)
        if (digests[i] === declared) {
          cls = 'stale';
          held = digests[i]!;
          break;
        }
      if (cls === 'unknown' && sentEarlier > 0) cls = 'stale';
    }
    // A report's own fields (not its transport), as values the draft already holds where equal.
    d.reportDeclared = held;
    d.reportMs = receivedMs;
    d.reportText = receivedText;
    if (d.sentDigest !== null && sameItems(applied, d.sentIds)) d.reportApplied = d.sentIds;
    else if (!(d.reported && sameItems(applied, d.reportApplied))) d.reportApplied = applied;
    d.reportFailed = hasKeys(failed) ? failed : noFailures;
    d.reportRefused = refused;
    if (carried.length === 0) d.reportCarried = none;
    else if (!sameItems(carried, d.reportCarried)) d.reportCarried = carried;
    d.reported = true;
    d.reportClass = cls;
    d.reportedSummary = null;
    if (cls === 'matching') {
      if (d.ackMs !== d.ackMs && d.ackText === null) {
        const latency = Math.max(0, parsedMs(receivedMs, receivedText) - parsedMs(d.sentAtMs, d.sentAtText));
        d.ackMs = receivedMs;
        d.ackText = receivedText;
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
    if (isLater(d.seenMs, d.seenText, receivedMs, receivedText)) {
      d.seenMs = receivedMs;
      d.seenText = receivedText;
    }
    d.reports++;
    d.lastReportId = id;
  }
  moved(d, position, revision);
}

/** An AliveSeen into the draft; `seenText` null when isoMs read the time (`seenMs`). */
export function draftAlive(d: NodeDraft, position: number, revision: number, seenMs: number, seenText: string | null): void {
  // Only a later time is a change.
  if (isLater(d.seenMs, d.seenText, seenMs, seenText)) {
    d.seenMs = seenMs;
    d.seenText = seenText;
  } else if (position <= d.position && revision <= d.revision) return;
  moved(d, position, revision);
}

/** A NodeRetired into the draft: the first retirement's time stays while it is retired (foldNode). */
export function draftRetire(d: NodeDraft, position: number, revision: number, at: string): void {
  if (d.retiredAt === null) d.retiredAt = at;
  else if (position <= d.position && revision <= d.revision) return;
  moved(d, position, revision);
}

/** Fold one event into the draft, in place: foldNode's rules (nodeState.ts), field by field. */
export function foldIntoDraft(d: NodeDraft, event: Recorded): void {
  switch (event.type) {
    case 'DeclarationSent': {
      const x = event.data;
      const ms = isoMs(x.sentAt);
      draftSend(
        d,
        exactNumber(event.position),
        exactNumber(event.revision),
        x.digest,
        x.specDigest,
        x.serial,
        ms,
        textUnlessMs(x.sentAt, ms),
        x.resourceIds,
      );
      return;
    }
    case 'ReportReceived': {
      const r = event.data;
      const ms = isoMs(r.receivedAt);
      draftReport(
        d,
        exactNumber(event.position),
        exactNumber(event.revision),
        event.id,
        r.declared,
        ms,
        textUnlessMs(r.receivedAt, ms),
        r.applied,
        r.failed,
        r.refused,
        r.carried,
        r.sentEarlier?.serial ?? 0,
      );
      return;
    }
    case 'AliveSeen':
      return draftSeen(d, event, event.data.seenAt);
    // A transition's time is a sign of life (foldNode).
    case 'NodeHeard':
      return draftSeen(d, event, event.data.at);
    case 'NodeSilent':
      return draftSeen(d, event, event.data.lastSeenAt);
    case 'NodeRetired':
      return draftRetire(d, exactNumber(event.position), exactNumber(event.revision), event.data.at);
    default:
      // A rollout's event says nothing about a node, and moves nothing (foldNode).
      return;
  }
}

function draftSeen(d: NodeDraft, event: Recorded, at: string): void {
  const ms = isoMs(at);
  draftAlive(d, exactNumber(event.position), exactNumber(event.revision), ms, textUnlessMs(at, ms));
}

const sameItems = <T>(a: readonly T[], b: readonly T[] | undefined): boolean => {
  if (b === undefined || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
};

// The text of the last time published: a report's time is usually also its node's last-seen
// time and acknowledgement, so one string serves the three (as the event's one string did).
let textMs = NaN;
let textOfMs = '';
function timeText(ms: number, text: string | null): string | null {
  if (text !== null) return text;
  if (ms !== ms) return null;
  if (ms !== textMs) {
    textOfMs = isoText(ms);
    textMs = ms;
  }
  return textOfMs;
}

/** The immutable state the draft stands for: deep-equal to what foldNode would have returned. */
export function publishDraft(d: NodeDraft): NodeState {
  if (d.published !== null) return d.published;
  let sent = d.sentSummary;
  if (sent === null && d.sentDigest !== null) {
    sent = {
      digest: d.sentDigest,
      specDigest: d.sentSpec,
      serial: d.sentSerial,
      sentAt: timeText(d.sentAtMs, d.sentAtText)!,
      resourceIds: d.sentIds,
      acknowledgedAt: timeText(d.ackMs, d.ackText),
    };
    d.sentSummary = sent;
  }
  let reported = d.reportedSummary;
  if (reported === null && d.reported) {
    // foldNode shares arrays the state already holds when a report repeats them: equal values.
    const sentIds = sent?.resourceIds;
    reported = {
      declared: d.reportDeclared,
      receivedAt: timeText(d.reportMs, d.reportText)!,
      applied: sentIds !== undefined && sameItems(d.reportApplied, sentIds) ? sentIds : d.reportApplied,
      failed: d.reportFailed,
      refused: d.reportRefused,
      carried: d.reportCarried,
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
    lastSeenAt: timeText(d.seenMs, d.seenText),
    retiredAt: d.retiredAt,
    anomalies,
    convergence,
    earlierSends,
    reports: d.reports,
    lastReportId: d.lastReportId,
    position: BigInt(d.position),
    revision: BigInt(d.revision),
  };
  d.published = state;
  return state;
}

function hasKeys(o: Readonly<Record<string, string>>): boolean {
  for (const k in o) if (Object.hasOwn(o, k)) return true;
  return false;
}
