import { ConvergeError } from '../../src/core/errors.ts';
import type { ErrorCode } from '../../src/core/errors.ts';
import { isNodeEvent } from '../../src/core/events/index.ts';
import type { NodeEvent, Recorded } from '../../src/core/events/index.ts';
import { classifyReport, foldNode, initialNodeState, sendHistoryLimit, serialOfSent } from './nodeState.ts';
import type { NodeState, ReportClass } from './nodeState.ts';

// Forensics (docs/design.md §3): "state as of time T or position P" is the fold of nodeState.ts stopped
// early; a timeline classifies each report against what had been sent when it arrived; and the
// race finder replays the OLD clock rule beside the digest rule to list every report the old
// mesh would have wrongly counted as caught up (node-side/000_43ee4d2afc08e8d3.txt).
// Pure: events in, values out. Scanners are incremental so callers can feed a store in batches.

export type At = Readonly<{ kind: 'position'; position: bigint }> | Readonly<{ kind: 'time'; time: number; iso: string }>;

/** The largest store position: positions are 64-bit unsigned. */
export const maxPosition = 2n ** 64n - 1n;

/** How a moment is written, for the errors that refuse one. */
export const momentHint =
  'write a store position (all digits) or an ISO 8601 time with its zone, like 2026-11-30T14:00:00Z or 2026-11-30T15:00:00+01:00 (a date alone, 2026-11-30, is midnight UTC)';

const dateOnly = /^(\d{4})-(\d{2})-(\d{2})$/;
const dateTime = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(Z|[+-](\d{2}):(\d{2}))?$/;

const leap = (y: number): boolean => (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
const daysIn = (year: number, month: number): number => (month === 2 ? (leap(year) ? 29 : 28) : [4, 6, 9, 11].includes(month) ? 30 : 31);

/**
 * A moment as written: all digits, a store position (at most maxPosition); else an ISO 8601 time
 * in extended format, a date alone (midnight UTC) or a date-time with `Z` or an offset. A time
 * without a zone would be read in the reading process's zone, so a CLI and a server elsewhere
 * would answer differently: it is refused, as is a date that does not exist (2026-02-30) and any
 * other text. `problem` says why, in words that follow the moment as written.
 */
export function readAt(text: string): At | { problem: string } {
  if (/^\d+$/.test(text)) {
    const position = BigInt(text);
    return position > maxPosition ? { problem: `is past the largest store position (${maxPosition})` } : { kind: 'position', position };
  }
  const d = dateOnly.exec(text) ?? dateTime.exec(text);
  if (d === null) return { problem: `is neither an ISO 8601 time nor a decimal position: ${momentHint}` };
  const n = (i: number): number => Number(d[i] ?? 0);
  const [month, day] = [n(2), n(3)];
  if (month < 1 || month > 12 || day < 1 || day > daysIn(n(1), month) || n(4) > 23 || n(5) > 59 || n(6) > 59 || n(8) > 23 || n(9) > 59)
    return { problem: `is not a date and time that exist: ${momentHint}` };
  if (d[4] !== undefined && d[7] === undefined)
    return { problem: `has no zone: add Z for UTC or an offset, like ${text}Z or ${text}+01:00` };
  const t = Date.parse(text);
  return Number.isNaN(t) ? { problem: `is not a valid time: ${momentHint}` } : { kind: 'time', time: t, iso: new Date(t).toISOString() };
}

/**
 * readAt's moment, or refused with `code`: `${what} "<text>" <problem>`. One reading for the CLI's
 * flags (usage errors), the API's queries (400) and a send's or a rollout's asOf.
 */
export function readMoment(what: string, text: string, code: ErrorCode, details?: Record<string, unknown>): At {
  const at = readAt(text);
  if ('problem' in at)
    throw new ConvergeError(code, `${what} ${JSON.stringify(text)} ${at.problem}`, details === undefined ? {} : { details });
  return at;
}

/** A moment as written (`what`, `text`) and as read. */
export type WrittenMoment = Readonly<{ what: string; text: string; at: At }>;

/** A window whose start comes after its end (windowProblem) refused with `code`, naming both ends as written. */
export function mustBeInOrder(from: WrittenMoment, to: WrittenMoment, code: ErrorCode): void {
  const problem = windowProblem(from.at, to.at);
  if (problem !== null)
    throw new ConvergeError(code, `${from.what} ${JSON.stringify(from.text)} is after ${to.what} ${JSON.stringify(to.text)}: ${problem}`);
}

/** readAt's moment, or null when the text is not one. */
export function parseAt(text: string): At | null {
  const at = readAt(text);
  return 'problem' in at ? null : at;
}

/**
 * Why a window from `from` to `to` cannot be asked for: its start comes after its end, so it would
 * hold nothing. Null when it is in order, or when one end is a time and the other a position (only
 * the store can order those).
 */
export function windowProblem(from: At, to: At): string | null {
  if (from.kind === 'position' && to.kind === 'position')
    return from.position > to.position
      ? `position ${from.position} comes after position ${to.position}; give the earlier end as from`
      : null;
  if (from.kind === 'time' && to.kind === 'time')
    return from.time > to.time ? `${from.iso} comes after ${to.iso}; give the earlier end as from` : null;
  return null;
}

/** When the engine recorded the event (the only clock an event carries). */
export function eventTime(e: Recorded): string {
  switch (e.type) {
    case 'DeclarationSent':
      return e.data.sentAt;
    case 'ReportReceived':
      return e.data.receivedAt;
    case 'AliveSeen':
      return e.data.seenAt;
    case 'NodeHeard':
      return e.data.at;
    case 'NodeSilent':
      return e.data.observedAt;
    case 'NodeRetired':
    case 'NodeHeld':
    case 'NodeReleased':
    case 'NodePinned':
    case 'NodeUnpinned':
      return e.data.at;
    case 'ObservationStarted':
    case 'ObservationStopped':
    case 'AuditCheckpointed':
      return e.data.at;
    case 'RolloutStarted':
      return e.data.startedAt;
    case 'RolloutNodesListed':
      return e.data.listedAt;
    case 'WaveStarted':
      return e.data.startedAt;
    case 'RolloutSent':
      return e.data.sentAt;
    case 'WaveCompleted':
      return e.data.completedAt;
    case 'RolloutPaused':
    case 'RolloutResumed':
    case 'RolloutHalted':
    case 'RolloutCompleted':
    case 'RolloutAborted':
    case 'RollbackStarted':
    case 'RollbackCompleted':
    case 'WaveGateChecked':
      return e.data.at;
    case 'RollbackSent':
      return e.data.sentAt;
  }
}

/**
 * True once the event lies beyond `at`. By position that ends the fold; by time it does not: the
 * engine's clock may have stepped back, so a later event can carry an earlier time. Position is the
 * order; "as of time T" is the fold up to the last event, in position order, recorded at or before
 * T, so every event before that one counts whatever its time (docs/design.md §3, "As of a time").
 */
export const isBeyond = (e: Recorded, at: At): boolean =>
  at.kind === 'position' ? e.position > at.position : Date.parse(eventTime(e)) > at.time;

export type StoppedFold = Readonly<{ state: NodeState; folded: number; lastEventAt: string | null }>;

/**
 * A node's state as of `at`: its stream folded in order up to its last event not beyond `at`. By
 * time the whole stream is scanned, since a later-stamped event is no end when the clock stepped.
 */
export function stateAt(node: string, events: Iterable<Recorded>, at: At): StoppedFold {
  let state = initialNodeState(node);
  let folded = 0;
  let lastEventAt: string | null = null;
  // Folded past the last event within `at`: kept until an event within it makes it the answer.
  let ahead = state;
  let aheadCount = 0;
  for (const e of events) {
    if (isBeyond(e, at)) {
      if (at.kind === 'position') break;
      ahead = foldNode(ahead, e);
      aheadCount++;
      continue;
    }
    state = ahead = foldNode(ahead, e);
    folded += aheadCount + 1;
    aheadCount = 0;
    lastEventAt = eventTime(e);
  }
  return { state, folded, lastEventAt };
}

export type FleetFold = Readonly<{
  push: (e: Recorded) => void;
  states: () => ReadonlyMap<string, NodeState>;
}>;

/**
 * The whole fleet as of `at` (or now, if `at` is null), fed the store in position order: each node
 * as `stateAt` folds it. Per node, the fold past its last event within `at` is kept beside its
 * answer, so two states a node, whatever the store holds after `at`.
 */
export function createFleetFold(at: At | null = null): FleetFold {
  const states = new Map<string, NodeState>();
  const ahead = new Map<string, NodeState>();
  const stopped = new Set<string>();
  return {
    push(e) {
      if (!isNodeEvent(e)) return;
      const node = e.data.node;
      if (stopped.has(node)) return;
      const beyond = at !== null && isBeyond(e, at);
      if (beyond && at.kind === 'position') {
        stopped.add(node);
        return;
      }
      const folded = foldNode(ahead.get(node) ?? states.get(node) ?? initialNodeState(node), e);
      if (beyond) {
        ahead.set(node, folded);
        return;
      }
      ahead.delete(node);
      states.set(node, folded);
    },
    states: () => states,
  };
}

export type TimelineEntry = Readonly<{
  position: bigint;
  revision: bigint;
  id: string;
  type: NodeEvent['type'];
  at: string;
  /** DeclarationSent: its digest; ReportReceived: the digest it names (null: legacy report). */
  digest: string | null;
  serial: number | null;
  /** ReportReceived only: how the report related to what had been sent when it arrived. */
  class: ReportClass | null;
  /** ReportReceived only: the same report delivered again (changes nothing). */
  duplicate: boolean;
  /** Status after folding this event. */
  status: NodeState['status'];
}>;

export type DeclarationOutcome = Readonly<{
  serial: number;
  digest: string;
  sentAt: string;
  outcome: 'acknowledged' | 'superseded' | 'pending';
  acknowledgedAt: string | null;
  /** Send → first matching report (docs/design.md §3). */
  latencyMs: number | null;
  supersededAt: string | null;
}>;

export type Timeline = Readonly<{
  node: string;
  entries: readonly TimelineEntry[];
  declarations: readonly DeclarationOutcome[];
  state: NodeState;
}>;

/** A node's whole history, each report classified and each declaration's convergence latency. */
export function timeline(node: string, events: Iterable<Recorded>): Timeline {
  let state = initialNodeState(node);
  const entries: TimelineEntry[] = [];
  const declarations: DeclarationOutcome[] = [];
  for (const e of events) {
    if (!isNodeEvent(e)) continue;
    const before = state;
    state = foldNode(state, e);
    let digest: string | null = null;
    let serial: number | null = null;
    let cls: ReportClass | null = null;
    let duplicate = false;
    if (e.type === 'DeclarationSent') {
      digest = e.data.digest;
      serial = e.data.serial;
      const prev = declarations.at(-1);
      if (prev !== undefined && prev.outcome === 'pending')
        declarations[declarations.length - 1] = { ...prev, outcome: 'superseded', supersededAt: e.data.sentAt };
      declarations.push({
        serial,
        digest,
        sentAt: e.data.sentAt,
        outcome: 'pending',
        acknowledgedAt: null,
        latencyMs: null,
        supersededAt: null,
      });
    } else if (e.type === 'ReportReceived') {
      digest = e.data.declared;
      serial = digest === null ? null : serialOfSent(before, digest, e.data.sentEarlier);
      cls = classifyReport(before, digest, e.data.sentEarlier);
      duplicate = e.id === before.lastReportId;
      const last = declarations.at(-1);
      if (!duplicate && cls === 'matching' && last !== undefined && last.outcome === 'pending') {
        declarations[declarations.length - 1] = {
          ...last,
          outcome: 'acknowledged',
          acknowledgedAt: e.data.receivedAt,
          latencyMs: Math.max(0, Date.parse(e.data.receivedAt) - Date.parse(last.sentAt)),
        };
      }
    }
    entries.push({
      position: e.position,
      revision: e.revision,
      id: e.id,
      type: e.type,
      at: eventTime(e),
      digest,
      serial,
      class: cls,
      duplicate,
      status: state.status,
    });
  }
  return { node, entries, declarations, state };
}

export type Race = Readonly<{
  node: string;
  /** Position of the report in the store. */
  position: bigint;
  receivedAt: string;
  /** Digest the report names (null: a legacy report naming none). */
  reportDigest: string | null;
  /** Serial of that digest if it was ever sent to this node. */
  reportSerial: number | null;
  /** The latest declaration sent when the report arrived: what the node should have been running. */
  currentDigest: string;
  currentSerial: number;
  sentAt: string;
  class: Exclude<ReportClass, 'matching'>;
}>;

export type RaceScanner = Readonly<{ push: (e: Recorded) => Race | null; scanned: () => number }>;

/**
 * The OLD rule: a report that arrived at or after the latest send means "caught up".
 * The digest rule (docs/design.md §3): caught up only if the report names the latest send's digest.
 * A race is a report the first counts and the second does not.
 */
export function createRaceScanner(): RaceScanner {
  // Per node, the latest send and the digests of the sends kept before it: the fold's window
  // (sendHistoryLimit), so a race is classified as the node's state classifies the report.
  type Latest = { digest: string; serial: number; sentAt: string; sentMs: number; earlier: readonly (readonly [string, number])[] };
  const latest = new Map<string, Latest>();
  let scanned = 0;
  return {
    scanned: () => scanned,
    push(e) {
      scanned++;
      if (!isNodeEvent(e)) return null;
      const node = e.data.node;
      if (e.type === 'DeclarationSent') {
        const prev = latest.get(node);
        const earlier =
          prev === undefined
            ? []
            : [...prev.earlier.slice(Math.max(0, prev.earlier.length - (sendHistoryLimit - 2))), [prev.digest, prev.serial] as const];
        latest.set(node, {
          digest: e.data.digest,
          serial: e.data.serial,
          sentAt: e.data.sentAt,
          sentMs: Date.parse(e.data.sentAt),
          earlier,
        });
        return null;
      }
      if (e.type !== 'ReportReceived') return null;
      const sent = latest.get(node);
      if (sent === undefined) return null;
      const clockSaysCaughtUp = Date.parse(e.data.receivedAt) >= sent.sentMs;
      const declared = e.data.declared;
      if (!clockSaysCaughtUp || declared === sent.digest) return null;
      // Older than the window: what ingest found in the store, as the fold reads it.
      const reportSerial =
        declared === null ? null : (sent.earlier.find((x) => x[0] === declared)?.[1] ?? e.data.sentEarlier?.serial ?? null);
      return {
        node,
        position: e.position,
        receivedAt: e.data.receivedAt,
        reportDigest: declared,
        reportSerial,
        currentDigest: sent.digest,
        currentSerial: sent.serial,
        sentAt: sent.sentAt,
        class: declared === null ? 'undeclared' : reportSerial === null ? 'unknown' : 'stale',
      };
    },
  };
}

export function findRaces(events: Iterable<Recorded>): Race[] {
  const scanner = createRaceScanner();
  const out: Race[] = [];
  for (const e of events) {
    const r = scanner.push(e);
    if (r !== null) out.push(r);
  }
  return out;
}
