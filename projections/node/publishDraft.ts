import { exactNumber, isoMs, isoText } from '../../src/core/events/index.ts';
import { noFailures, none, statusOf } from './nodeState.ts';
import type { EarlierSend, NodeState } from './nodeState.ts';
import type { NodeDraft } from './nodeDraft.ts';
import { sameItems, textUnlessMs } from './nodeStateFast.ts';

// Between a draft (nodeDraft.ts) and the immutable NodeState it stands for: publishDraft builds the
// state when someone asks for it, once per node rather than once per event, and draftOf goes back
// from a published state (a snapshot's) to a draft that continues it. Status, caughtUp, missing and
// carried are functions of the latest send and report alone (statusOf), so they are computed here.

/** A held time of `text`: its milliseconds when isoMs reads it, else NaN (and the text kept: textUnlessMs); null: none. */
const msOf = (text: string | null): number => (text === null ? NaN : isoMs(text));

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
