import { isConvergeError } from '../core/errors.ts';
import type { Recorded } from '../core/events/index.ts';
import { retry } from '../retry.ts';
import type { RetryResult } from '../retry.ts';
import { defaultSliceMs, nextTurn } from '../turnBudget.ts';
import type { Notifier } from './notifier.ts';
import type { SubscribeOptions, Subscription } from './port.ts';

// Catch-up and live are one loop over the global position: read the next batch after the last
// position handled, hand it over, repeat; when a read comes back empty, wait for a wake-up
// (same process) or a poll tick (another process). Because both phases read the same ordered
// log by position there is no switch-over to get wrong: no gap, no duplicate (docs/design.md §5).
// Memory and SQLite share it; they only differ in how they read and how they are woken.

export type PollingSource = Readonly<{
  /**
   * Events with position > after, in position order, at most `limit`; only `types` when given
   * (the source selects them, so the rest is never decoded: SubscribeOptions.types).
   */
  readAfter: (after: bigint | null, limit: number, types: ReadonlySet<string> | null) => Promise<readonly Recorded[]>;
  headPosition: () => Promise<bigint | null>;
  getCheckpoint: (name: string) => Promise<bigint | null>;
  setCheckpoint: (name: string, position: bigint) => Promise<void>;
  notifier: Notifier;
  pollMs: number;
}>;

const backoff = { minMs: 50, maxMs: 5_000 } as const;

/** The fewest events a read asks for while batches run long: below it a read's own cost dominates. */
export const minTurnBatch = 16;

/**
 * The events the next read asks for, from what the last batch cost: its synchronous work (the
 * read's decode where the store reads on this thread, the handler's fold) in one turn of the
 * loop, which holds every request for as long. At most `batchSize`, and about what fits
 * `sliceMs` (src/turnBudget.ts) once a batch ran longer; growing back at most twice a batch.
 */
export function nextBatchLimit(limit: number, batchSize: number, handled: number, syncMs: number, sliceMs = defaultSliceMs): number {
  if (handled === 0 || syncMs <= 0) return Math.min(batchSize, limit * 2);
  const fits = Math.floor((sliceMs * handled) / syncMs);
  return Math.max(Math.min(minTurnBatch, batchSize), Math.min(batchSize, limit * 2, fits));
}

export function createPollingSubscription(
  source: PollingSource,
  options: SubscribeOptions,
  /** A clock in ms for the batches' cost (tests inject one). */
  now: () => number = () => performance.now(),
): Subscription {
  const abort = new AbortController();
  const signal = abort.signal;
  const batchSize = Math.max(1, options.batchSize ?? 500);
  // A checkpointed subscription (the relay) pays a store write per batch: its batches stay as asked.
  const adapts = options.checkpoint === undefined;
  let limit = batchSize;
  let syncMs = 0;
  /** Run `fn`, counting the time until it returns (its synchronous part) to the batch. */
  const timed = <T>(fn: () => T): T => {
    const t0 = now();
    try {
      return fn();
    } finally {
      syncMs += now() - t0;
    }
  };
  const types = options.types === undefined ? null : new Set<string>(options.types);
  let position: bigint | null = null;
  let caughtUp = false;

  const report = (err: unknown): void => {
    try {
      options.onError?.(err);
    } catch {
      // an error reporter that throws must not kill the subscription it reports on
    }
  };

  /** Retry `fn` with doubling backoff until it succeeds or the subscription stops. */
  const retrying = <T>(fn: () => Promise<T>): Promise<RetryResult<T>> =>
    retry(fn, {
      ...backoff,
      signal,
      onError: (err) => {
        if (isConvergeError(err, 'CONVERGE_ERR_STORE_CLOSED')) {
          abort.abort();
          return false;
        }
        report(err);
        return true;
      },
    });

  async function run(): Promise<void> {
    const start = await retrying(async () => {
      const saved = options.checkpoint === undefined ? null : await source.getCheckpoint(options.checkpoint);
      return { after: saved ?? options.after ?? null, head: await source.headPosition() };
    });
    if (!start.ok) return;
    position = start.value.after;
    const head = start.value.head;

    const markCaughtUp = (): void => {
      if (caughtUp) return;
      caughtUp = true;
      try {
        options.onCaughtUp?.();
      } catch (err) {
        report(err);
      }
    };
    if (head === null || (position !== null && position >= head)) markCaughtUp();

    while (!signal.aborted) {
      const seen = source.notifier.version();
      const after = position;
      syncMs = 0;
      // A filtered subscription (types) learns the head first: when nothing after `after` matches,
      // every event up to that head was read past, so the next wake starts there instead of scanning
      // the same non-matching events again. Positions are committed in order in every polling
      // store (SQLite's single writer, PostgreSQL's row-locked counter), so no event at or below
      // the head can still appear. Without this, a filter whose events are rare (the rollout
      // driver's, on a store without rollouts) rescanned the whole log on every append.
      const scanned = types === null ? null : await retrying(() => source.headPosition());
      if (scanned !== null && !scanned.ok) return;
      const read = await retrying(() => timed(() => source.readAfter(after, limit, types)));
      if (!read.ok) return;
      const batch = read.value;
      const last = batch[batch.length - 1];
      if (last === undefined) {
        const head = scanned?.value ?? null;
        if (head !== null && (position === null || head > position)) position = head;
        markCaughtUp();
        await source.notifier.wait(seen, source.pollMs, signal);
        continue;
      }
      const handled = await retrying(async () => timed(() => options.handler(batch)));
      if (!handled.ok) return;
      if (adapts) limit = nextBatchLimit(limit, batchSize, batch.length, syncMs);
      position = last.position;
      if (options.checkpoint !== undefined) {
        const name = options.checkpoint;
        if (signal.aborted) {
          // stop() arrived while the handler ran: the batch is done, so record it once more
          // rather than make the next run replay it.
          await source.setCheckpoint(name, last.position).catch(report);
          return;
        }
        const saved = await retrying(() => source.setCheckpoint(name, last.position));
        if (!saved.ok) return;
      }
      if (head !== null && position >= head) markCaughtUp();
      // Reads and handlers settle as microtasks, so catching up would otherwise run batch after
      // batch in one event-loop turn: 1.9 s behind wide reports, with no timer, socket
      // or request served meanwhile. One turn per batch, in the engine's one queue of jobs
      // (src/turnBudget.ts): subscriptions catching up together take turns, a batch each.
      await nextTurn();
    }
  }

  const done = run().catch(report);
  return {
    position: () => position,
    isCaughtUp: () => caughtUp,
    stop: async () => {
      abort.abort();
      await done;
    },
  };
}
