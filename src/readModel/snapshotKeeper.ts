import { rm } from 'node:fs/promises';
import type { Logger } from 'pino';
import type { Metrics } from '../metrics.ts';
import { unlessAborted } from '../retry.ts';
import type { EventStore } from '../store/index.ts';
import type { ReadModel } from './readModel.ts';
import type { RolloutView } from './rollouts.ts';
import { foldVersion, rejectionOf, snapshotFormat, writeSnapshot } from './snapshot/snapshotFile.ts';
import type { SnapshotRejection } from './snapshot/snapshotFile.ts';
import { transitionCode } from './snapshot/transitions.ts';
import { trustedSnapshot } from './snapshot/trust.ts';

// The projection runner's snapshots (docs/design.md §6): restored at start when trusted, written
// every so many events folded, and once more on demand. Kept apart from the runner's fold loop,
// which only says what it folded and when a snapshot may be due.

export type SnapshotOptions = Readonly<{
  path: string;
  /**
   * Read at start when `path` does not exist (the default snapshot's name in earlier engines:
   * `<sqlite file>.snapshot.json`), and deleted once a snapshot is written to `path`.
   */
  formerPath?: string;
  /** Events folded between two snapshots, at least. */
  everyEvents: number;
  /**
   * And at least this many events per node in the read model (default 0: `everyEvents` alone).
   * Writing a snapshot costs in proportion to the nodes; an interval that grows with them keeps
   * its cost per event folded the same at any fleet size (at 10,000 nodes a fixed
   * 10,000 wrote every node once per 10,000 events, ~8% of a drain's time in serve).
   */
  everyEventsPerNode?: number;
}>;

export type SnapshotKeeper = Readonly<{
  /** Restore the read model (and its rollouts) from the snapshot, when there is one to trust. */
  restore: () => Promise<void>;
  /** The id of the last event folded: a snapshot stores it to tie itself to this store. */
  folded: (eventId: string) => void;
  /** A snapshot once the interval has passed since the last one, the model now at `position`. */
  ifDue: (position: bigint) => void;
  /**
   * A snapshot of the model as it is now, after the one being written; given up (logged, the
   * previous snapshot left in place) if both are not written within `withinMs`.
   */
  writeNow: (withinMs?: number) => Promise<void>;
  /** Resolves once no snapshot is being written (one given up is not waited for). */
  settled: () => Promise<void>;
}>;

export function createSnapshotKeeper(
  o: Readonly<{
    store: EventStore;
    readModel: ReadModel;
    rollouts: RolloutView;
    log: Logger;
    metrics: Metrics | undefined;
    snapshot: SnapshotOptions | undefined;
  }>,
): SnapshotKeeper {
  const { store, readModel, rollouts, log, metrics } = o;
  let lastSnapshotAt: bigint | null = null;
  let writing: Promise<void> | null = null;
  /** Ends the write under way (writeNow's bound passed). */
  let writeAbort: AbortController | null = null;
  let lastEventId: string | null = null;
  /** Why a snapshot is not used, said once: a warn log with the reason (info for an expected upgrade) and the metric. */
  function discard(path: string, err: unknown): void {
    const reason: SnapshotRejection = rejectionOf(err);
    metrics?.snapshotRejected.inc({ reason });
    const message = err instanceof Error ? err.message : String(err);
    // A snapshot of another format or fold is what an upgrade leaves: expected, not alarming.
    const level = reason === 'format' || reason === 'fold-version' ? 'info' : 'warn';
    log[level]({ path, reason, detail: message }, `snapshot not used (${reason}): folding from zero`);
  }

  async function restore(): Promise<void> {
    const opts = o.snapshot;
    if (opts === undefined) return;
    const t0 = performance.now();
    const outcome = await trustedSnapshot(store, opts.path, opts.formerPath);
    if (outcome.kind === 'rejected') discard(outcome.path, outcome.err);
    if (outcome.kind !== 'trusted') return;
    const snap = outcome.snap;
    readModel.restore(snap.states, snap.position, snap.transitions);
    // A snapshot holds node states only: the rollouts it stands for are folded from their streams.
    await rollouts.load(store, snap.position);
    lastSnapshotAt = snap.position;
    lastEventId = snap.eventId;
    log.info(
      { path: snap.path, position: snap.position.toString(), nodes: snap.states.length, ms: Math.round(performance.now() - t0) },
      'restored read model from snapshot',
    );
  }

  /** writeNow gave up (the stop's bound): no write starts after it, a periodic one included. */
  let givenUp = false;

  function snapshotNow(): Promise<void> {
    const opts = o.snapshot;
    const position = readModel.position();
    if (opts === undefined || position === null || position === lastSnapshotAt || givenUp) return Promise.resolve();
    if (writing !== null) return writing;
    const eventId = lastEventId;
    if (eventId === null) return Promise.resolve();
    // States are immutable values: the array taken now is the model at `position`, however far
    // the fold moves while the writer encodes it a slice at a time (snapshot.ts).
    const states = [...readModel.nodes()];
    // Taken with the states, in the same turn: each node's latest transition at `position`.
    const transitions = new Uint8Array(states.length);
    for (let i = 0; i < states.length; i++) transitions[i] = transitionCode(readModel.transitionOf(states[i]!.node));
    const lastAt = lastSnapshotAt;
    lastSnapshotAt = position;
    const t0 = performance.now();
    const abort = new AbortController();
    writeAbort = abort;
    writing = writeSnapshot(
      opts.path,
      {
        format: snapshotFormat,
        foldVersion,
        position,
        eventId,
        writtenAt: new Date().toISOString(),
        states,
        transitions,
      },
      abort.signal,
    )
      .then(async ({ bytes }) => {
        log.debug({ position: position.toString(), bytes, ms: Math.round(performance.now() - t0) }, 'snapshot written');
        // The snapshot under its former name is stale from now on: gone, so deleting the new one is still always safe.
        if (opts.formerPath !== undefined && opts.formerPath !== opts.path) await rm(opts.formerPath, { force: true });
      })
      .catch((err: unknown) => {
        // Given up by writeNow, which says so: the model at `position` is not in the file.
        if (abort.signal.aborted) {
          if (lastSnapshotAt === position) lastSnapshotAt = lastAt;
          return;
        }
        log.warn({ err, path: opts.path }, 'snapshot write failed; will retry at the next interval');
      })
      .finally(() => {
        if (writeAbort === abort) {
          writing = null;
          writeAbort = null;
        }
      });
    return writing;
  }

  const every = o.snapshot === undefined ? null : BigInt(Math.max(1, o.snapshot.everyEvents));
  const perNode = BigInt(Math.max(0, o.snapshot?.everyEventsPerNode ?? 0));
  /** Events between two snapshots now: the larger of the fixed interval and perNode × nodes. */
  const interval = (): bigint | null => {
    if (every === null) return null;
    const scaled = perNode * BigInt(readModel.size());
    return scaled > every ? scaled : every;
  };
  /** A snapshot once the interval has passed since the last one, the model now at `position`. */
  function snapshotIfDue(position: bigint): void {
    const n = interval();
    if (n !== null && (lastSnapshotAt === null ? position : position - lastSnapshotAt) >= n) void snapshotNow();
  }

  return {
    restore,
    folded: (eventId) => {
      lastEventId = eventId;
    },
    ifDue: snapshotIfDue,
    writeNow: async (withinMs = Number.POSITIVE_INFINITY) => {
      const t0 = performance.now();
      const late = new AbortController();
      const timer = Number.isFinite(withinMs) ? setTimeout(() => late.abort(), Math.max(0, withinMs)) : undefined;
      try {
        await unlessAborted(
          (async () => {
            if (writing !== null) await writing;
            // Given up while the write before it ended: nothing more is written (the stop goes on).
            if (!late.signal.aborted) await snapshotNow();
          })(),
          late.signal,
        );
      } catch (err) {
        if (!late.signal.aborted) throw err;
        givenUp = true;
        // The write may be held where no slice is reached (a disk that does not answer): it ends
        // on its own, its temporary file removed, and nothing waits for it.
        writeAbort?.abort();
        log.warn(
          { path: o.snapshot?.path, withinMs: Math.round(withinMs), ms: Math.round(performance.now() - t0) },
          'snapshot given up: not written within its bound; the previous snapshot stays, and the next start folds the events after it',
        );
      } finally {
        clearTimeout(timer);
      }
    },
    settled: async () => {
      if (writing !== null && writeAbort?.signal.aborted !== true) await writing;
    },
  };
}
