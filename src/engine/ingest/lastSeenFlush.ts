import { hostname } from 'node:os';
import type { Logger } from 'pino';
import { observationEventId, observationStream } from '../../core/events/index.ts';
import type { ObservationStarted, ObservationStopped, WithId } from '../../core/events/index.ts';
import type { EventStore } from '../../store/port.ts';
import type { LivenessWatch } from './livenessWatch.ts';

// The exact last-seen times, flushed to the store's last-seen table every `everyMs`, and the
// observation span they stand for (docs/design.md §3). Starting: the table's rows restore the
// watch, and ObservationStarted records the table's last flush — when observation was last known
// good, so a crash's unobserved span is bounded by it. Stopping: a last flush, then
// ObservationStopped. A SIGKILL loses at most `everyMs` of last-seen times.

export type LastSeenFlushOptions = Readonly<{
  store: EventStore;
  watch: LivenessWatch;
  logger: Logger;
  everyMs: number;
  nowMs: () => number;
  graceMs: number;
  engine?: string;
}>;

export function createLastSeenFlush(options: LastSeenFlushOptions): Readonly<{ start: () => Promise<void>; stop: () => Promise<void> }> {
  const { store, watch, logger, everyMs, nowMs, graceMs } = options;
  const engine = options.engine ?? `${hostname()}/${process.pid}`;
  const table = store.lastSeen;
  let timer: NodeJS.Timeout | null = null;
  let flushing: Promise<void> = Promise.resolve();

  const observe = async (e: WithId<ObservationStarted | ObservationStopped>): Promise<void> => {
    await store.append([{ stream: observationStream, expected: 'any', events: [e] }]);
  };

  function flush(): Promise<void> {
    if (table === undefined) return Promise.resolve();
    flushing = flushing.then(async () => {
      const rows = watch.takeDirty();
      try {
        await table.save(rows, nowMs());
      } catch (err) {
        // Kept for the next flush: nothing is lost but time.
        logger.warn({ err: (err as Error).message }, 'could not flush the last-seen table');
        watch.restoreDirty(rows);
      }
    });
    return flushing;
  }

  return {
    async start() {
      let lastFlushAt: number | null = null;
      if (table !== undefined) {
        const loaded = await table.load();
        watch.restore(loaded.rows);
        lastFlushAt = loaded.flushedAt;
      }
      const at = new Date(nowMs()).toISOString();
      await observe({
        id: observationEventId(engine, 'ObservationStarted', at),
        type: 'ObservationStarted',
        data: { engine, at, graceMs, lastFlushAt: lastFlushAt === null ? null : new Date(lastFlushAt).toISOString() },
      });
      await flush();
      timer = setInterval(() => void flush(), everyMs);
      timer.unref?.();
    },
    async stop() {
      if (timer !== null) clearInterval(timer);
      timer = null;
      await flush();
      const at = new Date(nowMs()).toISOString();
      try {
        await observe({
          id: observationEventId(engine, 'ObservationStopped', at),
          type: 'ObservationStopped',
          data: { engine, at, why: 'stopped' },
        });
      } catch (err) {
        // The next start's lastFlushAt bounds the span instead.
        logger.warn({ err: (err as Error).message }, 'could not record the end of observation');
      }
    },
  };
}
