import type { Recorded } from '../../src/core/events/index.ts';
import { exactNumber, isoMs, isoText } from '../../src/core/events/index.ts';
import { later, noFailures, none, sendHistoryLimit, recentLatencyLimit } from './nodeState.ts';
import type { ReportClass } from './nodeState.ts';
import type { NodeDraft } from './nodeDraft.ts';

// The fold of nodeState.ts on a private, mutable working state (nodeDraft.ts), for the paths that
// fold many events before anyone reads the result: a replay from zero (`replay --verify`), a
// catch-up. It mirrors nodeState.ts's fold case by case, and the two are read side by side.
// foldNode builds a new state per event (and a new summary per report), which on a 1,000,000-event
// replay meant a young-generation GC every ~8,000 events and ~1 µs of fold per event
// (bench/replay.ts). A draft takes each event in place and builds the immutable NodeState only
// when asked (`publishDraft`, publishDraft.ts), so a replay allocates states per node, not per event.
//
// The contract is foldNode's: for every history, publishDraft of the drafted fold is deep-equal
// to foldNodeEvents of the same events (test/projections/node/nodeStateFast.property.test.ts holds the two
// equal on arbitrary histories, duplicates and out-of-order positions included). It changes no
// result, so foldVersion stays.
//
// Events come in two ways: as Recorded (foldIntoDraft) or as typed fields (draftSend, draftReport,
// draftAlive: a columnar read, src/store/nodeColumns.ts). foldIntoDraft is those three on the event's fields.

/** `text` as a held time, given isoMs's reading of it (`ms`): null when that reading stands for it, else the text. */
export const textUnlessMs = (text: string | null, ms: number): string | null => (ms === ms ? null : text);

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

export const sameItems = <T>(a: readonly T[], b: readonly T[] | undefined): boolean => {
  if (b === undefined || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
};

function hasKeys(o: Readonly<Record<string, string>>): boolean {
  for (const k in o) if (Object.hasOwn(o, k)) return true;
  return false;
}
