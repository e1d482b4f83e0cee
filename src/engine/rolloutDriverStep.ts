import { foldRollout, foldRolloutEvents } from '../../projections/index.ts';
import {
  decide,
  decideRollback,
  defaultSilentGraceMs,
  eventOfDecision,
  isTerminal,
  noHold,
  owesRollback,
  rollbackProgress,
} from '../core/rollout/index.ts';
import type { Decision, LateHold, RolloutState, WaveProgress } from '../core/rollout/index.ts';
import { isConvergeError } from '../core/errors.ts';
import { listLimit, rolloutStreamOf } from '../core/events/index.ts';
import type { Recorded, RolloutEvent, WithId } from '../core/events/index.ts';
import { sleep } from '../retry.ts';
import { nextTurn } from '../turnBudget.ts';
import type { Logger } from 'pino';
import { sendRollback, sendWave } from './rolloutSends.ts';
import type { RolloutClock } from './rolloutClock.ts';
import type { RolloutDriverOptions } from './rolloutDriverOptions.ts';
import type { HoldsReader } from './holds.ts';
import type { GateKeeper } from './rolloutGate.ts';
import { openWaveProgress } from './rolloutProgressAhead.ts';
import { maxLog } from './rolloutDriven.ts';
import type { Driven } from './rolloutDriven.ts';
import type { BatchSender } from './sendBatch.ts';

// One rollout's turn in a round of the rollout driver (rolloutDriver.ts): read what its stream
// gained, ask `decide` what to do, record the answer at the revision it decided on, and again,
// until it has to wait. The loop, the lease and the follow subscription are the driver's.

export type StepDeps = Readonly<{
  options: RolloutDriverOptions;
  logger: Logger;
  now: () => Date;
  clock: RolloutClock;
  /** The clock `options.observedSince` answers on. */
  monotonic: () => number;
  holds: HoldsReader;
  gates: GateKeeper;
  sender: BatchSender;
  /** The driver's rollouts, by id: a step drops one that ended. */
  rollouts: Map<string, Driven>;
  /** Whether the driver may still act (running and holding the lease). */
  acting: () => boolean;
}>;

export type RolloutStepper = Readonly<{
  /**
   * Drive one rollout as far as it goes now; resolves with how long until it looks again (ms;
   * null: on an event). Once `signal` aborts (the driver stops) it rejects with its reason at the
   * next piece of work, an append already made waited for: the record says where the next start goes on.
   */
  step: (id: string, signal: AbortSignal) => Promise<number | null>;
}>;

type Act = Exclude<Decision, { kind: 'wait' } | { kind: 'gate' }> | Readonly<{ kind: 'gated'; event: WithId<RolloutEvent> }>;

export function createRolloutStepper(deps: StepDeps): RolloutStepper {
  const { options, logger, now, clock, holds, gates, sender, rollouts } = deps;
  const { store, nodeOf } = options;
  const batchSize = Math.max(1, Math.min(options.batchSize ?? 500, listLimit));
  const pollMs = options.pollMs ?? 1_000;
  const graceMs = options.graceMs ?? defaultSilentGraceMs;
  const progressOf = (s: RolloutState, wave: number): WaveProgress | null =>
    openWaveProgress({ ...options, graceMs }, rollouts.get(s.id), s, wave);

  /**
   * When late nodes may be judged, on the rollout's time at `nowMs` (docs/design.md §8
   * "Timeouts while not observed"): not while no report can arrive, and not until a grace after
   * they can again, the time ingest gives a node to be heard after a resume before it records it silent.
   */
  const holdAt = (nowMs: number): LateHold => {
    const since = options.observedSince?.();
    if (since === undefined) return noHold;
    if (since === null) return { fromMs: null, why: 'not observing: no report can arrive' };
    return { fromMs: nowMs + (since + graceMs - deps.monotonic()), why: 'a grace after observing again, for the reports queued meanwhile' };
  };

  /** Keep what the decision says of a held timeout (wave null: the rollback's), its start kept while it lasts. */
  const noteHeld = (entry: Driven, id: string, wave: number | null, d: Decision, nowMs: number): void => {
    const before = entry.held;
    if (d.kind !== 'wait' || d.held === undefined) entry.held = null;
    else {
      const sinceMs = before !== null && before.wave === wave ? before.sinceMs : nowMs;
      entry.held = { wave, sinceMs, untilMs: d.held.fromMs, graceMs };
    }
    const after = entry.held;
    if (before?.wave !== after?.wave || before?.untilMs !== after?.untilMs) options.onTimeoutHeld?.(id);
  };

  const readPage = Math.max(1, options.readPage ?? 8);

  /** Read what the stream holds past the fold, and fold it: a page a turn of the loop. */
  async function refresh(entry: Driven, id: string, s: RolloutState | null, signal: AbortSignal): Promise<RolloutState | null> {
    if (s !== null && !entry.moved) return s;
    entry.moved = false;
    let next = s;
    for (let first = true; ; first = false) {
      if (!first) await nextTurn();
      if (signal.aborted) {
        // Read again in full by the next round, or the next start.
        entry.moved = true;
        signal.throwIfAborted();
      }
      const events = (await store.readStream(rolloutStreamOf(id), {
        ...(next === null ? {} : { fromRevision: next.revision + 1n }),
        limit: readPage,
      })) as Recorded<RolloutEvent>[];
      if (next === null) {
        next = foldRolloutEvents(events);
        if (next === null) return null;
      } else {
        for (const e of events) next = foldRollout(next, e);
        // Kept only while the view lags (progressOf trims it); bounded in case it never catches up.
        if (s !== null && options.progressFolded !== undefined) {
          entry.log.push(...events);
          if (entry.log.length > maxLog) entry.log.splice(0, entry.log.length - maxLog);
        }
      }
      if (events.length < readPage) return next;
    }
  }

  /** Whether the read model has folded everything the store holds now (waiting a little for it). */
  async function readModelCurrent(signal: AbortSignal): Promise<boolean> {
    const position = options.readModelPosition;
    if (position === undefined) return true;
    const head = await store.headPosition();
    if (head === null) return true;
    for (let i = 0; i < 50; i++) {
      if ((position() ?? -1n) >= head) return true;
      await sleep(10, signal);
      signal.throwIfAborted();
    }
    return false;
  }

  /** Carry out one decision; resolves once it is recorded (or another writer's record made it moot). */
  async function act(s: RolloutState, d: Act, signal: AbortSignal): Promise<void> {
    const stream = rolloutStreamOf(s.id);
    // Whatever the outcome (recorded, or lost to another writer), the stream is read again.
    const entry = rollouts.get(s.id);
    if (entry !== undefined) entry.moved = true;
    try {
      if (d.kind === 'rollbackSend') {
        const sent = await sendRollback({ store, sender, nodeOf, now, holds, signal }, s, d.nodes.slice(0, batchSize));
        options.metrics?.eventsAppended.inc({ type: 'DeclarationSent' }, sent);
        options.metrics?.eventsAppended.inc({ type: 'RollbackSent' });
      } else if (d.kind === 'send') {
        const sent = await sendWave(
          { store, sender, now, holds, signal },
          s,
          d.wave,
          d.nodes.slice(0, batchSize),
          d.nodes.slice(batchSize, 2 * batchSize),
        );
        options.metrics?.eventsAppended.inc({ type: 'DeclarationSent' }, sent);
        options.metrics?.eventsAppended.inc({ type: 'RolloutSent' });
      } else {
        const event = d.kind === 'gated' ? d.event : eventOfDecision(s, d, now().toISOString());
        signal.throwIfAborted();
        await store.append([{ stream, expected: s.revision, events: [event] }]);
        options.metrics?.eventsAppended.inc({ type: event.type });
      }
      if (d.kind !== 'gated') options.onDecision?.(s.id, d);
      logger.info(
        {
          rollout: s.id,
          decision: d.kind,
          ...('wave' in d ? { wave: d.wave } : {}),
          ...(d.kind === 'send' || d.kind === 'rollbackSend' ? { nodes: Math.min(d.nodes.length, batchSize) } : {}),
        },
        'rollout decision recorded',
      );
    } catch (err) {
      // The stream moved since the fold (an operator's pause, another driver): read and decide again.
      if (isConvergeError(err, 'CONVERGE_ERR_WRONG_EXPECTED_REVISION') && err.details?.['stream'] === stream) return;
      throw err;
    }
  }

  /**
   * A rollback's next step (rollback.ts), or how long until it looks again. Its end counts the
   * nodes still behind as failed only once the read model has folded what the store holds.
   */
  async function rollbackStep(
    entry: Driven,
    s: RolloutState,
    signal: AbortSignal,
  ): Promise<Exclude<Act, { kind: 'gated' }> | number | null> {
    const decideNow = (): Decision => {
      const nowMs = clock.nowMs(s);
      return decideRollback(s, rollbackProgress(s, nodeOf, listLimit), nowMs, nodeOf, graceMs, listLimit, holdAt(nowMs));
    };
    const d = decideNow();
    noteHeld(entry, s.id, null, d, clock.nowMs(s));
    if (d.kind === 'wait') return d.untilMs === null ? null : Math.max(0, d.untilMs - clock.nowMs(s));
    if (d.kind === 'gate') return pollMs; // no gate in a rollback
    if (d.kind !== 'completeRollback') return d;
    if (!(await readModelCurrent(signal))) return pollMs;
    const again = decideNow();
    return again.kind === 'wait' || again.kind === 'gate' ? 0 : again;
  }

  async function step(id: string, signal: AbortSignal): Promise<number | null> {
    const entry = rollouts.get(id);
    if (entry === undefined) return null;
    for (let round = 0; round < 1_000 && deps.acting(); round++) {
      const s = await refresh(entry, id, entry.state, signal);
      entry.state = s;
      if (s === null) return null;
      if (isTerminal(s.status) && !owesRollback(s)) {
        rollouts.delete(id);
        clock.forget(id);
        gates.forget(id);
        return null;
      }
      if (s.rollback !== null) {
        const d = await rollbackStep(entry, s, signal);
        if (typeof d === 'number' || d === null) return d;
        await act(s, d, signal);
        if (d.kind === 'rollbackSend') await nextTurn();
        continue;
      }
      // A completed wave's count decides nothing (decide opens the next on the record). Right after
      // the driver records a WaveCompleted the view has not folded it, and the count fell back to
      // a walk over the whole wave: 50,000 nodes, one of a large rollout's longest turns.
      const open = s.current === 0 ? undefined : s.waves[s.current - 1];
      const progress = open === undefined || open.completed !== null ? null : progressOf(s, s.current);
      const nowMs = clock.nowMs(s);
      const d = decide(s, progress, nowMs, listLimit, holdAt(nowMs));
      noteHeld(entry, s.id, s.current, d, nowMs);
      if (d.kind === 'wait') return d.untilMs === null ? null : Math.max(0, d.untilMs - nowMs);
      // The gate is asked off the loop (rolloutGate.ts): its answer, once in, is recorded here.
      const gated = d.kind === 'gate' ? gates.step(s, d.wave) : null;
      if (typeof gated === 'number') return gated;
      if (gated !== null) {
        await act(s, { kind: 'gated', event: gated }, signal);
        continue;
      }
      if (d.kind === 'gate') continue;
      if ((d.kind === 'completeWave' || d.kind === 'halt') && !(await readModelCurrent(signal))) return pollMs;
      if (d.kind === 'completeWave' || d.kind === 'halt') {
        // Decided on a read model that may have moved while it caught up: decide again on the
        // current one, and act only if the answer stands.
        const at = clock.nowMs(s);
        const again = decide(s, s.current === 0 ? null : progressOf(s, s.current), at, listLimit, holdAt(at));
        if (again.kind !== d.kind) continue;
        await act(s, again, signal);
        continue;
      }
      await act(s, d, signal);
      // One batch a turn: on a store whose appends resolve in the same turn, a wave's sends would
      // otherwise hold the event loop from the API, ingest and the projections until all were sent.
      if (d.kind === 'send') await nextTurn();
    }
    return 0;
  }

  return { step };
}
