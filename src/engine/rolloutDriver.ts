import { isTerminal } from '../core/rollout/index.ts';
import type { RolloutState } from '../core/rollout/index.ts';
import { rolloutEventTypes, rolloutOfStream } from '../core/events/index.ts';
import { sleep } from '../retry.ts';
import type { Subscription } from '../store/port.ts';
import { whileLeased } from '../store/whileLeased.ts';
import { createRolloutClock } from './rolloutClock.ts';
import { createBatchSender } from './sendBatch.ts';
import type { RolloutDriverOptions } from './rolloutDriverOptions.ts';
import { createHoldsReader } from './holds.ts';
import { createGateKeeper } from './rolloutGate.ts';
import { driven, endStatus } from './rolloutDriven.ts';
import type { Driven, HeldTimeout } from './rolloutDriven.ts';
import { createRolloutStepper } from './rolloutDriverStep.ts';
import { createSignPool } from './signPool.ts';
import type { BatchSender } from './sendBatch.ts';

// The rollout driver, a process manager. It keeps no state of its own that a
// restart could lose: each rollout is the fold of its stream (projections/rollout.ts), read
// from the store before every decision, and how the open wave's nodes stand is the read
// model's node fold. It asks `decide` what to do, records the answer in the rollout's stream
// at the revision it decided on, and asks again once that is folded:
//
//   - every event it writes has a deterministic id (src/core/events/makeRollout.ts) and expects the
//     revision it was decided at, so two drivers (or a driver and an operator's pause) taking
//     decisions on one view cannot both record theirs: the loser reads again and decides again;
//   - a wave's sends and the RolloutSent that lists them are one append call (sendBatch.ts);
//     after a crash the fold says what was sent, and a send retried from a stale view keeps the
//     first (its id names the rollout and the node, not the serial);
//   - a decision that only a timeout allows (a wave completed or halted with nodes still behind)
//     is taken only once the read model has folded everything the store held when deciding,
//     so a report already stored is never counted as missing.
//
// One driver acts at a time: on a store several engines share it holds the store's
// `rollouts` lease (as the relay holds `relay`); SQLite is one engine's. This file is the loop
// (rounds, waking, following, the checkpoint, the lease); one rollout's turn in a round, from
// reading its stream to recording a decision, is rolloutDriverStep.ts.

export type { RolloutDriverOptions } from './rolloutDriverOptions.ts';
export type { HeldTimeout } from './rolloutDriven.ts';

export type RolloutDriver = Readonly<{
  start: () => void;
  stop: () => Promise<void>;
  /** Whether this engine is the one driving (it holds the lease, or the store has none). */
  active: () => boolean;
  /** Decide again now (after a command was recorded, say). */
  wake: () => void;
  /** Rollouts not finished, as the driver folded them last. */
  running: () => readonly RolloutState[];
  /**
   * The timeout of the rollout's open wave (or rollback) held as of the driver's last decision;
   * null: none held; undefined while this engine does not drive (it cannot know).
   */
  timeoutHeld: (rollout: string) => HeldTimeout | null | undefined;
  /** Resolves once a whole round of decisions that began after this call has ended (tests, the bench). */
  nextRound: () => Promise<void>;
}>;

/** Checkpoint below which every rollout has finished: a restart looks for rollouts from here. */
export const rolloutDriverCheckpoint = 'rollout-driver';

export function createRolloutDriver(options: RolloutDriverOptions): RolloutDriver {
  const { store, nodeOf } = options;
  const logger = options.logger.child({ component: 'rollout-driver' });
  const now = options.now ?? (() => new Date());
  const monotonic = options.monotonic ?? (() => performance.now());
  const clock = createRolloutClock(() => now().getTime(), monotonic);
  const pollMs = options.pollMs ?? 1_000;
  const minIntervalMs = options.minIntervalMs ?? 20;
  const checkpointEveryMs = options.checkpointEveryMs ?? 5_000;
  const holds = createHoldsReader(store);
  const gates = createGateKeeper({ ...options.gate, monotonic, now, wake: () => wake() });
  // The wave's declarations are signed on a thread of their own (signPool.ts), started at the
  // first send and stopped with the driver; should it fail, the sender signs here again.
  const signPool =
    options.signPool === null
      ? undefined
      : (options.signPool ??
        createSignPool({
          key: options.key,
          onFailure: (err) => logger.error({ err: err.message }, 'signing thread failed; signing on the engine thread from now on'),
        }));
  const sender: BatchSender = createBatchSender({
    store,
    key: options.key,
    now,
    ...(signPool === undefined ? {} : { signPool }),
    loadNode:
      options.loadNode ??
      (async (node) => {
        const s = nodeOf(node);
        return s === undefined ? { revision: -1n, carried: [], sent: null } : s;
      }),
  });

  /**
   * Rollouts to drive, by id: their fold (null until first read), where their stream starts, the
   * events read since the read side's view last caught up (progressAhead), and where the open
   * wave's unsent nodes begin.
   */
  const rollouts = new Map<string, Driven>();
  let running = false;
  let leased = false;
  let sub: Subscription | null = null;
  let loop: Promise<void> | null = null;
  let abort: AbortController | null = null;
  let wakeUp: (() => void) | null = null;
  let woken = false;
  let unlisten: (() => void) | null = null;
  let savedLow: bigint | null = null;
  let savedAt = Number.NEGATIVE_INFINITY;
  let rounds = 0;
  /** The round under way: rounds ended before it began. */
  let started = 0;
  let roundWaiters: { after: number; resolve: () => void }[] = [];

  /** Set by anything but a node change: the next round reads every rollout's stream again. */
  let reread = true;
  const wakeNodes = (): void => {
    woken = true;
    const w = wakeUp;
    wakeUp = null;
    w?.();
  };
  const wake = (): void => {
    reread = true;
    wakeNodes();
  };
  const { step } = createRolloutStepper({
    options,
    logger,
    now,
    clock,
    monotonic,
    holds,
    gates,
    sender,
    rollouts,
    acting: () => running && leased,
  });

  /** Rollouts are found by following their events; only the positions of unfinished ones are kept. */
  function follow(from: bigint | null): Subscription {
    return store.subscribe({
      after: from,
      types: [...rolloutEventTypes],
      batchSize: 500,
      handler: (events) => {
        for (const e of events) {
          const id = rolloutOfStream(e.stream);
          if (id === null) continue;
          // A rollout's end removes it once its fold says so (step); any other event of one not
          // known yet (its start is before the checkpoint only if it was already running) adds it.
          const known = rollouts.get(id);
          if (known !== undefined) known.moved = true;
          else if (!isTerminal(endStatus(e))) rollouts.set(id, driven(e.position));
        }
        wake();
      },
      onError: (err) => logger.warn({ err: (err as Error).message }, 'following rollout events failed; retrying'),
    });
  }

  /**
   * Where a restart should look from: before the oldest unfinished rollout, or as far as followed.
   * A rollout's start moves it at once; following alone moves it once per checkpointEveryMs (or
   * `force`, on stop). Any value saved is safe: it was the low water when saved, and a restart
   * from an older one only reads more rollout events (an ended rollout is dropped by its fold).
   */
  async function saveLowWater(force = false): Promise<void> {
    let low: bigint | null = null;
    for (const r of rollouts.values()) if (low === null || r.startedAt - 1n < low) low = r.startedAt - 1n;
    const following = low === null;
    if (low === null) low = sub?.position() ?? null;
    if (low === null || low === savedLow || low < 0n) return;
    const at = monotonic();
    if (following && !force && at - savedAt < checkpointEveryMs) return;
    await store.setCheckpoint(rolloutDriverCheckpoint, low);
    savedLow = low;
    savedAt = at;
  }

  async function drive(signal: AbortSignal): Promise<void> {
    const from = await store.getCheckpoint(rolloutDriverCheckpoint);
    savedLow = from;
    sub = follow(from);
    unlisten = options.onNodeChange?.(() => wakeNodes()) ?? null;
    try {
      while (!signal.aborted) {
        // A round only node changes woke decides on the folds it has; any other (a timer, a
        // command, the follow subscription, the first) reads the streams again.
        if (reread || !woken) for (const r of rollouts.values()) r.moved = true;
        reread = false;
        woken = false;
        started = rounds;
        // When to look again, on the monotonic clock: a step of the wall clock moves no wait.
        let next = monotonic() + pollMs;
        for (const id of [...rollouts.keys()]) {
          if (signal.aborted) break;
          try {
            const after = await step(id, signal);
            if (after !== null) next = Math.min(next, monotonic() + after);
          } catch (err) {
            // Stopped mid-decision: what was appended stands, the rest is the next start's.
            if (signal.aborted) break;
            logger.error({ rollout: id, err: (err as Error).message }, 'rollout decision failed; trying again');
            next = Math.min(next, monotonic() + pollMs);
          }
        }
        rounds++;
        const due = roundWaiters.filter((w) => rounds > w.after);
        roundWaiters = roundWaiters.filter((w) => rounds <= w.after);
        for (const w of due) w.resolve();
        await saveLowWater().catch((err: unknown) => logger.warn({ err: (err as Error).message }, 'cannot save the rollout checkpoint'));
        await sleep(minIntervalMs, signal);
        if (woken || signal.aborted) continue;
        const waitMs = Math.max(0, Math.min(next - monotonic(), pollMs));
        await new Promise<void>((resolve) => {
          // One abort listener per wait, removed when the wait ends: a listener left behind each round
          // piled up on the driver's signal (MaxListenersExceededWarning after 10 rounds).
          const onAbort = (): void => wakeUp?.();
          const t = setTimeout(() => wakeUp?.(), waitMs);
          wakeUp = () => {
            clearTimeout(t);
            signal.removeEventListener('abort', onAbort);
            resolve();
          };
          signal.addEventListener('abort', onAbort, { once: true });
        });
        wakeUp = null;
      }
    } finally {
      unlisten?.();
      unlisten = null;
      await saveLowWater(true).catch((err: unknown) => logger.warn({ err: (err as Error).message }, 'cannot save the rollout checkpoint'));
      await sub?.stop();
      sub = null;
    }
  }

  /** Drive while this engine holds the store's `rollouts` lease (at once on a store with none). */
  const leasedDrive = (signal: AbortSignal): Promise<void> =>
    whileLeased({
      store,
      name: 'rollouts',
      signal,
      logger,
      retryMs: pollMs,
      taken: 'rollouts lease taken: this engine drives rollouts',
      lost: 'rollouts lease lost: another engine may drive now; waiting to take it again',
      run: async (held) => {
        leased = true;
        try {
          await drive(held);
        } finally {
          leased = false;
          rollouts.clear();
        }
      },
    });

  return {
    start() {
      if (running) return;
      running = true;
      abort = new AbortController();
      const signal = abort.signal;
      loop = leasedDrive(signal).catch((err: unknown) => logger.error({ err: (err as Error).message }, 'rollout driver stopped'));
    },
    async stop() {
      if (!running) return;
      running = false;
      abort?.abort();
      // A gate that never answers would keep serve's process alive to its timeout (up to 5 minutes).
      gates.stop();
      wake();
      await loop;
      loop = null;
      leased = false;
      await signPool?.close();
    },
    active: () => running && leased,
    wake,
    running: () => [...rollouts.values()].flatMap((r) => (r.state === null ? [] : [r.state])),
    timeoutHeld: (rollout) => (running && leased ? (rollouts.get(rollout)?.held ?? null) : undefined),
    nextRound: () =>
      new Promise<void>((resolve) => {
        // A round under way began before this call: wait for the one after it.
        roundWaiters.push({ after: started + 1, resolve });
        wake();
      }),
  };
}
