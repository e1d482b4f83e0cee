import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import { makeObservationStarted, makeObservationStopped, observationStream } from '../../core/events/index.ts';
import type { NodeSilent } from '../../core/events/index.ts';
import type { EventStore, NewEvent } from '../../store/port.ts';
import { createTurnBudget, nextTurn } from '../../turnBudget.ts';
import { createLivenessRecorder } from './recorder.ts';
import type { LivenessRecorder } from './recorder.ts';

// An engine's observation of liveness (docs/design.md §3 "Liveness as recorded"): the span it
// observed (ObservationStarted/Stopped in the `observation` stream), the sweep that records
// silences, and the last-seen lease flushed every `flushMs`. After a SIGKILL the record's
// liveness is wrong by at most `flushMs`: the next start closes the crashed span at the last
// flush (its `lastFlushAt`), and every node's last-seen time is at most that much behind.

export type LivenessObserverOptions = Readonly<{
  store: EventStore;
  logger: Logger;
  /** This engine's name in the record; stable across restarts, so a start can close its own crashed span. */
  engine: string;
  graceMs: number;
  /** How often the last-seen lease is written (the crash bound). */
  flushMs: number;
  /** Record silences through ingest's batches, in order with the node's other events. */
  enqueue: (events: readonly NewEvent<NodeSilent>[]) => void;
  /** Last-seen times the read model knows once it has caught up (a store written before the lease). */
  folded?: () => Promise<ReadonlyMap<string, number>>;
  now?: () => number;
  mono?: () => number;
}>;

export type LivenessObserver = Readonly<{
  recorder: LivenessRecorder;
  /** Load the lease, record the start (before anything is consumed), start the sweep and the flush. */
  start: () => Promise<void>;
  /** Stop the sweep (stopping: no silence is judged while the last batches are written). */
  pause: () => void;
  /** Stop the sweep and the flush, writing nothing (a stop with the store down). */
  halt: () => void;
  /** Flush the lease and record the stop. */
  stop: (why?: 'stopped' | 'broker-lost') => Promise<void>;
}>;

/**
 * Nodes a write of the lease carries: a wave's nodes heard at once are tens of thousands, and
 * taking them and handing them to the store in one piece held one turn of the loop for all.
 */
export const flushChunk = 2_000;

export function createLivenessObserver(options: LivenessObserverOptions): LivenessObserver {
  const { store, engine, graceMs, flushMs, enqueue } = options;
  const logger = options.logger.child({ component: 'liveness' });
  const now = options.now ?? Date.now;
  const mono = options.mono ?? (() => performance.now());
  const recorder = createLivenessRecorder({ graceMs });
  // Several engines may share a PostgreSQL store, each hearing some of every node's alives: a
  // silence is recorded only once the lease shows no engine heard the node within the grace.
  const shared = store.kind === 'postgres';
  const sweepMs = Math.max(50, Math.min(1_000, Math.floor(graceMs / 4)));
  let sweepTimer: NodeJS.Timeout | null = null;
  let flushTimer: NodeJS.Timeout | null = null;
  let sweeping = false;
  let flushing: Promise<void> = Promise.resolve();
  let running = false;

  async function sweep(): Promise<void> {
    if (sweeping || !running) return;
    sweeping = true;
    try {
      // A wave of nodes falling silent at once is thousands of events to make (an id each): made
      // a slice of the turn at a time (src/turnBudget.ts), each slice's handed to ingest as it is.
      const budget = createTurnBudget();
      if (!recorder.due(mono(), budget.spent)) return;
      const lease = shared ? (await store.loadLastSeen()).nodes : null;
      const seen = lease === null ? undefined : (node: string) => lease.get(node);
      for (;;) {
        const events = recorder.silences(mono(), now(), seen, budget.spent);
        if (events.length > 0) enqueue(events);
        // Ended early only when the slice was spent; a pass that ended within its slice found no more due.
        if (!budget.spent() || !running) break;
        await budget.nextSlice();
      }
    } catch (err) {
      logger.warn({ err: (err as Error).message }, 'could not read the last-seen lease; silences wait for the next sweep');
    } finally {
      sweeping = false;
    }
  }

  /**
   * The time every node's last-seen time is stored as of: the last whole flush (the start, whose
   * times came from the lease). A flush in chunks writes it with each chunk but the last, which
   * writes its own: a crash between two chunks leaves a flush time that still holds.
   */
  let flushedAt = 0;

  function flush(): Promise<void> {
    const at = now();
    flushing = flushing.then(async () => {
      // The nodes changed by now; those heard while the chunks are written go with the next flush.
      // A flush with no change still writes its time (one empty chunk).
      let left = recorder.changedCount();
      do {
        const chunk = recorder.takeChanged(Math.min(left, flushChunk));
        left -= chunk.length;
        try {
          await store.saveLastSeen(engine, left === 0 ? at : flushedAt, chunk);
        } catch (err) {
          // Not lost: the times stay in memory and go with a later flush (each only moves forward).
          recorder.requeue(chunk);
          logger.warn({ err: (err as Error).message }, 'could not flush the last-seen lease');
          return;
        }
        if (left > 0) await nextTurn();
      } while (left > 0);
      flushedAt = at;
    });
    return flushing;
  }

  return {
    recorder,
    async start() {
      const lease = await store.loadLastSeen();
      const at = now();
      flushedAt = at;
      recorder.seed(lease.nodes, mono());
      await store.append([
        {
          stream: observationStream,
          expected: 'any',
          events: [makeObservationStarted(engine, at, graceMs, lease.flushes.get(engine) ?? null)],
        },
      ]);
      running = true;
      sweepTimer = setInterval(() => void sweep(), sweepMs);
      flushTimer = setInterval(() => void flush(), flushMs);
      sweepTimer.unref();
      flushTimer.unref();
      void options.folded?.().then(
        (known) => recorder.seed(known, mono()),
        () => undefined,
      );
    },
    pause() {
      if (sweepTimer !== null) clearInterval(sweepTimer);
      sweepTimer = null;
    },
    halt() {
      running = false;
      if (sweepTimer !== null) clearInterval(sweepTimer);
      if (flushTimer !== null) clearInterval(flushTimer);
      sweepTimer = flushTimer = null;
    },
    async stop(why = 'stopped') {
      if (!running) return;
      running = false;
      if (sweepTimer !== null) clearInterval(sweepTimer);
      if (flushTimer !== null) clearInterval(flushTimer);
      await flush();
      try {
        await store.append([{ stream: observationStream, expected: 'any', events: [makeObservationStopped(engine, now(), why)] }]);
      } catch (err) {
        // The next start closes this span at the flush above, as after a crash.
        logger.warn({ err: (err as Error).message }, 'could not record the end of observation');
      }
    },
  };
}
