import type { Logger } from 'pino';
import { observationStream } from '../../core/events/index.ts';
import type { ObservationStarted, ObservationStopped, WithId } from '../../core/events/index.ts';
import type { EventStore } from '../../store/port.ts';

// An engine's observation span events (docs/design.md §3 "Not observed"), appended in the order
// they happened. One the store refused (down when the broker link was lost too) waits and goes
// with the next write, so a start is never appended before the stop it follows.

type SpanEvent = WithId<ObservationStarted | ObservationStopped>;

export type SpanWriter = Readonly<{
  /**
   * After every write asked before it, run `job` (a flush of the lease, say) and append the span
   * event it gives, with any left unwritten before it. Resolves once tried; a failure is logged.
   */
  write: (job: () => Promise<SpanEvent | null> | SpanEvent | null) => Promise<void>;
  /** Span events waiting for the store. */
  unwritten: () => number;
}>;

export function createSpanWriter(store: EventStore, logger: Logger): SpanWriter {
  let unwritten: SpanEvent[] = [];
  let writing: Promise<void> = Promise.resolve();
  return {
    write(job) {
      writing = writing.then(async () => {
        let event: SpanEvent | null = null;
        try {
          event = await job();
        } catch (err) {
          // The chain goes on: a job that throws must not leave every later span event unwritten.
          logger.warn({ err: (err as Error).message }, 'could not make the observation span event');
        }
        if (event !== null) unwritten.push(event);
        if (unwritten.length === 0) return;
        const events = unwritten;
        try {
          await store.append([{ stream: observationStream, expected: 'any', events }]);
          unwritten = unwritten.slice(events.length);
        } catch (err) {
          // Tried again with the next write; if none lands, the next start closes the span at the
          // last flush, as after a crash (the flush time does not move while not observing).
          logger.warn({ err: (err as Error).message, events: events.map((e) => e.type) }, 'could not record the observation span');
        }
      });
      return writing;
    },
    unwritten: () => unwritten.length,
  };
}
