import { isObserved } from '../../projections/index.ts';
import type { ObservedSpan } from '../../projections/index.ts';
import type { EventStore } from '../store/index.ts';
import { readObservedSpans } from './queries.ts';
import type { ReadModel } from './readModelTypes.ts';

// The current view of an engine that runs no ingest (`serve` without --amqp, or --role api): it
// hears no node, so it cannot judge liveness by grace from the last sign of life. It answers as
// the record does as of now (docs/design.md §3 "Not observed"): while the observation spans show
// no engine observing, every node is not-observed, and the read model says why. When another
// engine observes (an open span) or the store predates spans, the read model judges as before.

export type LiveObservation = Readonly<{
  /** Read the observation spans again and set the read model's judgement; callers await it before answering. */
  refresh: () => Promise<void>;
}>;

export type LiveObservationOptions = Readonly<{
  store: EventStore;
  readModel: ReadModel;
  /** Why this engine does not observe, as the reason begins (e.g. "started without --amqp"). */
  why: string;
  now?: () => number;
}>;

/** The reason the view gives: why this engine does not observe, and since when no engine has. */
export function unobservedReason(why: string, spans: readonly ObservedSpan[]): string {
  const ended = Math.max(...spans.map((s) => s.to ?? s.from));
  return `this engine does not observe liveness (${why}), and no engine has since ${new Date(ended).toISOString()}`;
}

export function createLiveObservation({ store, readModel, why, now = Date.now }: LiveObservationOptions): LiveObservation {
  // One read at a time, each started after the call that awaits it: an answer never rests on a
  // read older than its request. The stream is a few events per engine start and stop.
  let last: Promise<void> = Promise.resolve();
  const read = async (): Promise<void> => {
    try {
      const spans = await readObservedSpans(store);
      readModel.setUnobserved(isObserved(spans, now()) ? null : unobservedReason(why, spans));
    } catch {
      // The store did not answer: the previous judgement stands; the request meets the store itself next.
    }
  };
  return {
    refresh: () => (last = last.then(read)),
  };
}
