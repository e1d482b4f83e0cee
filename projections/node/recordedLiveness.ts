import { isoMs } from '../../src/core/events/index.ts';
import type { Recorded } from '../../src/core/events/index.ts';
import { livenessAt } from './liveness.ts';
import type { Liveness } from './liveness.ts';
import { later } from './nodeState.ts';

// Liveness as of a moment, from the record alone (docs/design.md §3 "Liveness as recorded"). The
// engine records transitions — NodeHeard, NodeSilent with its own grace — and when it observed at
// all (ObservationStarted/Stopped). As of a moment:
// - inside a span no engine observed (after the first observation began): not-observed;
// - after the node's last transition at or before it: connected after NodeHeard, disconnected
//   after NodeSilent — whatever grace the reader has in mind, because the record says;
// - with no transition yet (a store written before transitions, AliveSeen every resolution):
//   today's rule, the last sign of life and the reader's grace.

const msOf = (text: string): number => {
  const ms = isoMs(text);
  return ms === ms ? ms : Date.parse(text);
};

/** An interval an engine observed, in ms; `to` null while it is open (or the engine is still running). */
export type ObservedSpan = Readonly<{ from: number; to: number | null }>;

/**
 * The observed spans of the observation stream, oldest first by start. Each engine's spans are
 * its own (several engines may share a store and observe at once): a start while that engine's
 * span is still open means it crashed, and the open span ends where it was last known good (the
 * start's `lastFlushAt`, never before the span began nor after this start).
 */
export function observedSpans(events: Iterable<Recorded>): ObservedSpan[] {
  const spans: { from: number; to: number | null }[] = [];
  const open = new Map<string, { from: number; to: number | null }>();
  for (const e of events) {
    if (e.type === 'ObservationStarted') {
      const at = msOf(e.data.at);
      const crashed = open.get(e.data.engine);
      if (crashed !== undefined) {
        const good = e.data.lastFlushAt === null ? crashed.from : msOf(e.data.lastFlushAt);
        crashed.to = Math.min(at, Math.max(crashed.from, good));
      }
      const span = { from: at, to: null };
      spans.push(span);
      open.set(e.data.engine, span);
    } else if (e.type === 'ObservationStopped') {
      const span = open.get(e.data.engine);
      if (span !== undefined) {
        span.to = Math.max(span.from, msOf(e.data.at));
        open.delete(e.data.engine);
      }
    }
  }
  return spans.sort((a, b) => a.from - b.from);
}

/** Was `moment` observed? Before the first span the store predates observation spans: it counts as observed (today's rule). */
export function isObserved(spans: readonly ObservedSpan[], moment: number): boolean {
  if (spans.length === 0 || moment < spans[0]!.from) return true;
  for (const s of spans) if (moment >= s.from && (s.to === null || moment <= s.to)) return true;
  return false;
}

/**
 * A node's liveness as of `moment` from its own events up to it (oldest first; the caller stops the
 * fold there, as stateAt does) and the observed spans.
 */
export function recordedLivenessAt(
  events: Iterable<Recorded>,
  moment: number,
  spans: readonly ObservedSpan[],
  readerGraceMs?: number,
): Liveness {
  let lastSeenAt: string | null = null;
  let last: 'heard' | 'silent' | null = null;
  for (const e of events) {
    switch (e.type) {
      case 'ReportReceived':
        lastSeenAt = later(lastSeenAt, e.data.receivedAt);
        break;
      case 'AliveSeen':
        lastSeenAt = later(lastSeenAt, e.data.seenAt);
        break;
      case 'NodeHeard':
        lastSeenAt = later(lastSeenAt, e.data.at);
        last = 'heard';
        break;
      case 'NodeSilent':
        lastSeenAt = later(lastSeenAt, e.data.lastSeenAt);
        last = 'silent';
        break;
      default:
        break;
    }
  }
  if (!isObserved(spans, moment)) return { state: 'not-observed', lastSeenAt, disconnectedForMs: 0 };
  if (last === null) return livenessAt(lastSeenAt, moment, readerGraceMs);
  return livenessByTransition(last, lastSeenAt!, moment);
}

/**
 * A node's liveness as of `moment` by its latest recorded transition (docs/design.md §3 "Liveness
 * as recorded"): connected after NodeHeard, disconnected after NodeSilent, whatever a reader's grace.
 */
export function livenessByTransition(last: 'heard' | 'silent', lastSeenAt: string, moment: number): Liveness {
  if (last === 'heard') return { state: 'connected', lastSeenAt, disconnectedForMs: 0 };
  return { state: 'disconnected', lastSeenAt, disconnectedForMs: Math.max(0, moment - msOf(lastSeenAt)) };
}
