import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import { makeObservationStarted, makeObservationStopped } from '../../core/events/index.ts';
import type { NodeSilent } from '../../core/events/index.ts';
import type { EventStore, NewEvent } from '../../store/port.ts';
import { createTurnBudget, nextTurn } from '../../turnBudget.ts';
import { createLivenessRecorder } from './recorder.ts';
import type { LivenessRecorder } from './recorder.ts';
import { createSpanWriter } from './spanWriter.ts';

// An engine's observation of liveness (docs/design.md §3 "Liveness as recorded"): the span it
// observed (ObservationStarted/Stopped in the `observation` stream), the sweep that records
// silences, and the last-seen lease flushed every `flushMs`. After a SIGKILL the record's
// liveness is wrong by at most `flushMs`: the next start closes the crashed span at the last
// flush (its `lastFlushAt`), and every node's last-seen time is at most that much behind.
// While ingest cannot consume (the broker link lost) the engine hears no node, so the span is
// closed 'broker-lost' and no silence is judged until consuming resumes and a span starts again.
// Nor before ingest first consumes: the span starts then, not at the start (consumer setup may
// fail for as long as a queue's broker node is down).

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
  /** Load the lease; nothing is observed, recorded or flushed until ingest first consumes (`consuming`). */
  start: () => Promise<void>;
  /** Stop the sweep (stopping: no silence is judged while the last batches are written). */
  pause: () => void;
  /** Stop the sweep and the flush, writing nothing (a stop with the store down). */
  halt: () => void;
  /** Flush the lease and record the stop (nothing more when the span was closed by a loss). */
  stop: () => Promise<void>;
  /** Ingest stopped consuming, the broker link lost: close the span now and judge no silence. */
  lost: () => void;
  /** Consuming, for the first time or again after a loss: a span starts now, every node judged a grace from here. */
  consuming: () => void;
  /** Between `lost` and `consuming`: this engine observes nothing. */
  isLost: () => boolean;
  /** When (on `mono`) the span open now began: the first consuming, or the latest resume; null with none open. */
  observedSince: () => number | null;
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
  /**
   * waiting: started, ingest not consuming yet (no span); observing: a span is open and silences
   * are judged; lost: closed by a loss of the broker link.
   */
  let phase: 'idle' | 'waiting' | 'observing' | 'lost' | 'stopped' = 'idle';
  /** The lease's flush time for this engine as the start found it: the first span's `lastFlushAt`. */
  let crashedFlush: number | null = null;
  /**
   * This run's first ObservationStarted is in the store. Until then no flush moves the lease's
   * flush time, which is what closes a crashed span of this engine's at its last flush.
   */
  let begun = false;
  let paused = false;
  /** When the loss was noticed: while lost, the lease's flush time stays there (the crash bound). */
  let lostAt = 0;
  let lastAt = 0;
  /** The monotonic time the open span began. */
  let spanFrom = 0;
  /** Each span event later than the one before, so a blip's stop and start never share a time (nor an id). */
  const stamp = (): number => (lastAt = Math.max(now(), lastAt + 1));

  async function sweep(): Promise<void> {
    if (sweeping || phase !== 'observing') return;
    sweeping = true;
    try {
      // A wave of nodes falling silent at once is thousands of events to make (an id each): made
      // a slice of the turn at a time (src/turnBudget.ts), each slice's handed to ingest as it is.
      const budget = createTurnBudget();
      if (!recorder.due(mono(), budget.spent)) return;
      const lease = shared ? (await store.loadLastSeen()).nodes : null;
      const seen = lease === null ? undefined : (node: string) => lease.get(node);
      for (;;) {
        // Asked again after each wait: the link may have been lost meanwhile.
        if (phase !== 'observing') break;
        const events = recorder.silences(mono(), now(), seen, budget.spent);
        if (events.length > 0) enqueue(events);
        // Ended early only when the slice was spent; a pass that ended within its slice found no more due.
        if (!budget.spent()) break;
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

  function flush(at = phase === 'lost' ? lostAt : now()): Promise<void> {
    flushing = flushing.then(async () => {
      if (!begun) return;
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

  const spanWriter = createSpanWriter(store, logger);
  const spans = {
    unwritten: spanWriter.unwritten,
    write: async (job: Parameters<typeof spanWriter.write>[0]): Promise<void> => {
      await spanWriter.write(job);
      // This run's first span event is its start: none left unwritten means the start is stored.
      if (spanWriter.unwritten() === 0) begun = true;
    },
  };

  function startSweep(): void {
    sweepTimer = setInterval(() => void sweep(), sweepMs);
    sweepTimer.unref();
  }

  function stopTimers(): void {
    if (sweepTimer !== null) clearInterval(sweepTimer);
    if (flushTimer !== null) clearInterval(flushTimer);
    sweepTimer = flushTimer = null;
  }

  return {
    recorder,
    async start() {
      if (phase !== 'idle') return;
      const lease = await store.loadLastSeen();
      crashedFlush = lease.flushes.get(engine) ?? null;
      recorder.seed(lease.nodes, mono());
      phase = 'waiting';
      void options.folded?.().then(
        (known) => recorder.seed(known, mono()),
        () => undefined,
      );
    },
    pause() {
      paused = true;
      if (sweepTimer !== null) clearInterval(sweepTimer);
      sweepTimer = null;
    },
    halt() {
      phase = 'stopped';
      stopTimers();
    },
    async stop() {
      // Never consumed: nothing was observed, so nothing is recorded (no stop without a start).
      if (phase === 'waiting') phase = 'stopped';
      if (phase !== 'observing' && phase !== 'lost') return;
      // Stopped while the link is lost: that span is closed already, and the lease stays at the loss.
      const at = phase === 'lost' ? lostAt : now();
      const closed = phase === 'lost';
      phase = 'stopped';
      stopTimers();
      await spans.write(async () => {
        await flush(at);
        return closed ? null : makeObservationStopped(engine, stamp(), 'stopped');
      });
    },
    lost() {
      if (phase !== 'observing') return;
      phase = 'lost';
      const at = (lostAt = stamp());
      if (sweepTimer !== null) clearInterval(sweepTimer);
      sweepTimer = null;
      logger.warn({ at: new Date(at).toISOString() }, 'broker link lost: not observing liveness until ingest consumes again');
      // The lease's last times as of the loss, then the end of the span.
      void spans.write(async () => {
        await flush(at);
        return makeObservationStopped(engine, at, 'broker-lost');
      });
    },
    isLost: () => phase === 'lost',
    observedSince: () => (phase === 'observing' ? spanFrom : null),
    consuming() {
      if (phase !== 'lost' && phase !== 'waiting') return;
      const first = phase === 'waiting';
      phase = 'observing';
      const at = stamp();
      spanFrom = mono();
      recorder.resume(spanFrom);
      if (first) {
        // The first span closes a crashed one of this engine's at the flush the start found.
        flushedAt = at;
        logger.info({ at: new Date(at).toISOString() }, 'consuming: observing liveness, every node judged a grace from now');
        void spans.write(() => makeObservationStarted(engine, at, graceMs, crashedFlush));
        flushTimer = setInterval(() => {
          void flush();
          if (spans.unwritten() > 0) void spans.write(() => null);
        }, flushMs);
        flushTimer.unref();
      } else {
        logger.info({ at: new Date(at).toISOString() }, 'consuming again: observing liveness, every node judged a grace from now');
        void spans.write(() => makeObservationStarted(engine, at, graceMs, flushedAt));
      }
      if (!paused) startSweep();
    },
  };
}
