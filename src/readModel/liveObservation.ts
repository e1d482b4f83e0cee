import { isObserved, livenessByTransition } from '../../projections/index.ts';
import type { Liveness, NodeState, ObservedSpan } from '../../projections/index.ts';
import type { EventStore } from '../store/index.ts';
import { readObservedSpans } from './queries.ts';
import type { ReadModel } from './readModelTypes.ts';

// The current view of an engine that runs no ingest (`serve` without --amqp, or --role api): it
// hears no node, so it cannot judge liveness by grace from the last sign of life. It answers as
// the record does as of now (docs/design.md §3): while the observation spans show no engine
// observing, every node is not-observed, and the read model says why ("Not observed"); while
// another engine observes, a node is judged by its latest recorded transition, connected after
// NodeHeard and disconnected after NodeSilent ("Liveness as recorded"), and by grace only without one.
// An engine with ingest does the same while its ingest cannot consume (the broker link lost, so it
// hears no node), and judges by grace, as it hears, the rest of the time.

export type LiveObservation = Readonly<{
  /** Read the observation spans again and set the read model's judgement; callers await it before answering. */
  refresh: () => Promise<void>;
  /** The current view judges by recorded transitions now (this engine does not observe itself). */
  followsRecord: () => boolean;
  /**
   * As the spans last read say: since when (ms, wall) engines have observed without a break up to
   * now; -Infinity for a store with no span recorded; null when none observes, or before the first read.
   */
  observedFrom: () => number | null;
}>;

export type LiveObservationOptions = Readonly<{
  store: EventStore;
  readModel: ReadModel;
  /** Why this engine does not observe, as the reason begins (e.g. "started without --amqp"). */
  why: string;
  /** This engine observes itself now (its ingest consumes): no spans are read, liveness judged by grace. Absent: never. */
  observing?: () => boolean;
  /** How long an answer waits for the spans' read before the last judgement answers (default 1 s). */
  readWaitMs?: number;
  now?: () => number;
}>;

/** The reason the view gives: why this engine does not observe, and since when no engine has. */
export function unobservedReason(why: string, spans: readonly ObservedSpan[]): string {
  const ended = Math.max(...spans.map((s) => s.to ?? s.from));
  return `this engine does not observe liveness (${why}), and no engine has since ${new Date(ended).toISOString()}`;
}

/**
 * The start of the unbroken observation that covers `at` (spans oldest first by start, as
 * observedSpans gives them; overlapping spans of several engines join), or null when none does.
 * Before the first span the store predates spans, and counts as observed (isObserved): -Infinity.
 */
export function observedFrom(spans: readonly ObservedSpan[], at: number): number | null {
  if (spans.length === 0 || at < spans[0]!.from) return Number.NEGATIVE_INFINITY;
  let from = spans[0]!.from;
  let to = Number.NEGATIVE_INFINITY;
  for (const s of spans) {
    if (s.from > at) break;
    if (s.from > to) from = s.from;
    to = Math.max(to, s.to ?? Number.POSITIVE_INFINITY);
  }
  return to >= at ? from : null;
}

/**
 * A node's liveness in the current view when the read model's judgement is not the grace rule's:
 * not-observed with the reason, or its recorded transition's (undefined: judge by grace).
 */
export function currentLiveness(readModel: ReadModel, st: NodeState, at: number, followsRecord: boolean): Liveness | undefined {
  const { lastSeenAt } = st;
  const reason = readModel.unobserved();
  if (reason !== null) return { state: 'not-observed', lastSeenAt, disconnectedForMs: 0, reason };
  if (!followsRecord || lastSeenAt === null) return undefined;
  const t = readModel.transitionOf(st.node);
  return t === null ? undefined : livenessByTransition(t, lastSeenAt, at);
}

export function createLiveObservation({
  store,
  readModel,
  why,
  observing,
  readWaitMs = 1_000,
  now = Date.now,
}: LiveObservationOptions): LiveObservation {
  let byRecord = false;
  let from: number | null = null;
  const follow = (on: boolean): void => {
    if (byRecord === on) return;
    byRecord = on;
    readModel.followRecord(on);
  };
  if (observing === undefined) follow(true);
  // An answer never rests on a read started before its request (unless the store takes longer than
  // readWaitMs to answer, below). Requests that arrive while a read
  // is under way share the one read after it, so a burst of them costs two reads, not one each.
  let running: Promise<void> | null = null;
  let queued: Promise<void> | null = null;
  /** This engine observes itself now: judged by grace, no span read. */
  const selfObserved = (): boolean => {
    if (observing?.() !== true) return false;
    readModel.setUnobserved(null);
    follow(false);
    return true;
  };
  const read = async (): Promise<void> => {
    if (selfObserved()) return;
    follow(true);
    try {
      const spans = await readObservedSpans(store);
      // Consuming again while the read waited: what it read no longer judges.
      if (selfObserved()) return;
      const at = now();
      from = observedFrom(spans, at);
      readModel.setUnobserved(isObserved(spans, at) ? null : unobservedReason(why, spans));
    } catch {
      // The store did not answer: the previous judgement stands; the request meets the store itself next.
    }
  };
  const start = (): Promise<void> => (running = read().finally(() => (running = null)));
  const next = (): Promise<void> => {
    if (running === null) return start();
    return (queued ??= running.then(() => {
      queued = null;
      return start();
    }));
  };
  // A store that does not answer (its link cut) must not hold the answer, a scrape of /metrics
  // included: past readWaitMs the last judgement answers, and the read goes on to judge again.
  const refresh = (): Promise<void> => {
    // Observing again: judged at once, not after a read of the spans still waiting on the store.
    if (selfObserved()) return Promise.resolve();
    const read = next();
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<void>((resolve) => (timer = setTimeout(resolve, readWaitMs)));
    return Promise.race([read, waited]).finally(() => clearTimeout(timer));
  };
  // An engine starting or stopping on a shared store: judged again at once, so an open event
  // stream's next node event says what a request would.
  readModel.onObservation(() => void refresh());
  return { refresh, followsRecord: () => byRecord, observedFrom: () => from };
}

/**
 * For an engine that runs no ingest, the rollout driver's `observedSince` (docs/design.md §8
 * "Timeouts while not observed"): since when, on `mono`, the record shows an engine observing without a break (null:
 * none now). The spans are read again at most every `everyMs`, without waiting for the read.
 */
export function observedSinceByRecord(
  observation: LiveObservation,
  mono: () => number,
  wall: () => number = Date.now,
  everyMs = 1_000,
): () => number | null {
  let readAt = Number.NEGATIVE_INFINITY;
  return () => {
    const at = mono();
    if (at - readAt >= everyMs) {
      readAt = at;
      void observation.refresh();
    }
    const from = observation.observedFrom();
    return from === null ? null : at - Math.max(0, wall() - from);
  };
}
