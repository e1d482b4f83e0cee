import { isNodeEvent } from '../../src/core/events/index.ts';
import type { Recorded } from '../../src/core/events/index.ts';
import { eventTime, stateAt, timeline } from './forensics.ts';
import type { At, DeclarationOutcome, TimelineEntry } from './forensics.ts';

// `history <node> --from` (docs/design.md §3): the timeline's entries from a moment on, each
// classified as the fold from the stream's first event classifies it, read from a suffix of the
// stream. What the shown entries read of the state before them: the latest send and the earlier
// ones it keeps (a report's class), the last report (status) and its id (a duplicate); and the
// declarations table wants the send of every digest they name and what followed it. A suffix that holds those gives every shown entry and declaration as the whole
// stream does (test/projections/node/timelineWindow.property.test.ts holds them equal).

/** An entry before `from`: recorded before its time, or stored before its position. */
export const isBeforeMoment = (e: Readonly<{ at: string; position: bigint }>, from: At): boolean =>
  from.kind === 'time' ? Date.parse(e.at) < from.time : e.position < from.position;

export type TimelineWindow = Readonly<{ from: At; to: At | null; limit: number }>;

export type WindowAnswer = Readonly<{ entries: readonly TimelineEntry[]; declarations: readonly DeclarationOutcome[] }>;

/**
 * The window's entries (the latest `limit` of those not before `from`, as of `to`) and the
 * declarations they name, from the whole stream or from a suffix `windowEnough` accepted.
 */
export function timelineWindow(node: string, events: readonly Recorded[], w: TimelineWindow): WindowAnswer {
  const cut = w.to === null ? events : events.slice(0, stateAt(node, events, w.to).folded);
  const t = timeline(node, cut);
  const windowed = t.entries.filter((e) => !isBeforeMoment(e, w.from));
  const entries = w.limit === Infinity ? windowed : windowed.slice(-w.limit);
  const named = new Set(entries.map((e) => e.digest));
  return { entries, declarations: t.declarations.filter((d) => named.has(d.digest)) };
}

/**
 * Whether `suffix` (every event of the node's stream from its first on, in revision order) is
 * enough for the window: it is the whole stream, or
 *  - it holds a send before the first entry shown (the latest send then: `sent`, so the status);
 *  - it holds the send of every digest a shown entry names. A report's class and serial are then
 *    the whole stream's: the fold keeps the last sends up to a limit, and the suffix holds that
 *    digest's send and every send after it; its declaration's outcome is read from what follows;
 *  - before the first entry shown and those sends, it holds two reports of different ids: every
 *    later report has the report before it in the suffix (the duplicate check), and the last
 *    report the fold took as new is one the suffix's fold takes as new too, whatever a report
 *    stored twice under one id holds.
 * Events before the suffix are all before `from` (the reader makes sure).
 */
export function windowEnough(node: string, w: TimelineWindow): (suffix: readonly Recorded[]) => boolean {
  return (suffix) => {
    if (suffix.length === 0 || suffix[0]!.revision === 0n) return true;
    const cut = w.to === null ? suffix : suffix.slice(0, stateAt(node, suffix, w.to).folded);
    const events = cut.filter(isNodeEvent);
    const first = events.findIndex((e) => !isBeforeMoment({ at: eventTime(e), position: e.position }, w.from));
    if (first < 0) return true;
    const eligible = events.slice(first).filter((e) => !isBeforeMoment({ at: eventTime(e), position: e.position }, w.from));
    const shown = w.limit === Infinity ? eligible : eligible.slice(-w.limit);
    const named = new Set<string>();
    for (const e of shown) {
      if (e.type === 'DeclarationSent') named.add(e.data.digest);
      else if (e.type === 'ReportReceived' && e.data.declared !== null) named.add(e.data.declared);
    }
    const sentAt = new Map<string, bigint>();
    let sentBefore = false;
    for (const [i, e] of events.entries()) {
      if (e.type !== 'DeclarationSent') continue;
      if (!sentAt.has(e.data.digest)) sentAt.set(e.data.digest, e.position);
      if (i < first) sentBefore = true;
    }
    if (!sentBefore) return false;
    let earliest = events[first]!.position;
    for (const d of named) {
      const p = sentAt.get(d);
      if (p === undefined) return false;
      if (p < earliest) earliest = p;
    }
    const reports = new Set<string>();
    for (const e of events) if (e.position < earliest && e.type === 'ReportReceived') reports.add(e.id);
    return reports.size >= 2;
  };
}
