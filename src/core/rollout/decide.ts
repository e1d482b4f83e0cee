import { makeRolloutEvent } from '../events/index.ts';
import type {
  FailureReason,
  RollbackCompletedData,
  RollbackScope,
  RolloutCompletedData,
  RolloutEvent,
  RolloutFailure,
  RolloutHaltedData,
  WaveCompletedData,
  WithId,
} from '../events/index.ts';
import { addTally, criteriaOf, tripped } from './criteria.ts';
import { allowance, allowedAt, meterOf } from './rate.ts';
import type { Tally, Tripped } from './criteria.ts';
import { defaultSilentGraceMs, failureDetail, lateFailure, nodeOutcome } from './outcome.ts';
import { heldFailures, holding, noHold } from './lateHold.ts';
import type { LateHold } from './lateHold.ts';
import { isTerminal, rollbackPolicy, supersededPolicy, targetsComplete, waveDeadline } from './state.ts';
import type { NodeFacts, RolloutState } from './state.ts';

// The driver's decision: a pure function of the folded rollout, how the open wave's
// nodes stand, and the time. The driver (src/engine/rolloutDriver.ts) carries it out, records
// it, and asks again once the record is folded.

/** The open wave's nodes still behind, taken as failures once its timeout has passed. */
export type Late = Readonly<{
  /** At most `limit` of them, in wave order, each 'timeout' or 'silent'. */
  failures: readonly RolloutFailure[];
  timeout: number;
  silent: number;
}>;

/** How the open wave's nodes stand now: kept by the read side (src/readModel/rollouts.ts). */
export type WaveProgress = Readonly<{
  wave: number;
  /** Nodes of the wave not sent to yet, in wave order (at most `limit` of them). */
  unsent: readonly string[];
  unsentCount: number;
  pending: number;
  done: number;
  superseded: number;
  /** Held or pinned when the wave was sent: not sent, neither done nor failed (docs/design.md §8 "Holds and pins"). */
  skipped: number;
  /** Refused, degraded or unsendable now, with details. */
  failures: readonly RolloutFailure[];
  failureCount: number;
  /** `failureCount` by class. */
  failuresByClass: Readonly<{ refused: number; degraded: number; unsendable: number }>;
  /** The pending nodes as failures at `nowMs`, by whether the node fold's liveness says they are connected. */
  late: (nowMs: number) => Late;
  supersededNodes: () => readonly string[];
}>;

export type Decision =
  // `held`: waiting only because a timeout past due is held (lateHold.ts), which the driver tells the API.
  | Readonly<{ kind: 'wait'; untilMs: number | null; why: string; held?: LateHold }>
  | Readonly<{ kind: 'startWave'; wave: number; from: number; to: number }>
  // The plan's gate must answer 2xx before this wave opens (src/engine/rolloutGate.ts asks it).
  | Readonly<{ kind: 'gate'; wave: number }>
  | Readonly<{ kind: 'send'; wave: number; nodes: readonly string[] }>
  | Readonly<{ kind: 'completeWave'; data: Omit<WaveCompletedData, 'rollout' | 'completedAt'> }>
  | Readonly<{ kind: 'halt'; data: Omit<RolloutHaltedData, 'rollout' | 'at'> }>
  | Readonly<{ kind: 'complete'; data: Omit<RolloutCompletedData, 'rollout' | 'at'> }>
  // A rollback's steps (rollback.ts): begin it (the plan's rollbackOnHalt), send, end.
  | Readonly<{ kind: 'startRollback'; scope: RollbackScope; wave: number }>
  | Readonly<{ kind: 'rollbackSend'; nodes: readonly string[] }>
  | Readonly<{ kind: 'completeRollback'; data: Omit<RollbackCompletedData, 'rollout' | 'at'> }>;

const cap = <T>(xs: readonly T[], n: number): T[] => (xs.length > n ? xs.slice(0, n) : [...xs]);

/** Failures spent of the budget over the completed waves: superseded nodes too under 'fail'. */
export const budgetUsed = (s: Pick<RolloutState, 'started' | 'failed' | 'superseded'>): number =>
  s.failed + (supersededPolicy(s) === 'fail' ? s.superseded : 0);

/** Failures by class and nodes settled over the completed waves. */
export const completedTally = (s: RolloutState): Tally => ({
  byClass: s.failedByClass,
  unclassified: s.unclassified,
  settled: s.done + s.failed + s.superseded,
});

/** The open wave's failures by class and settled nodes now (superseded ones only under 'fail'), and its late nodes once timed out. */
export function openTally(progress: WaveProgress, supersededFail: boolean, late: Late | null): Tally {
  const byClass: Partial<Record<FailureReason, number>> = {};
  const add = (k: FailureReason, n: number): void => {
    if (n > 0) byClass[k] = n;
  };
  add('refused', progress.failuresByClass.refused);
  add('degraded', progress.failuresByClass.degraded);
  add('unsendable', progress.failuresByClass.unsendable);
  if (supersededFail) add('superseded', progress.superseded);
  if (late !== null) {
    add('timeout', late.timeout);
    add('silent', late.silent);
  }
  const settled =
    progress.done + progress.failureCount + (supersededFail ? progress.superseded : 0) + (late === null ? 0 : late.timeout + late.silent);
  return { byClass, unclassified: 0, settled };
}

const sumAll = (t: Tally): number => Object.values(t.byClass).reduce((a, b) => a + (b ?? 0), t.unclassified);

/** `hold`: while it lasts, a wave past its timeout waits rather than judge its late nodes (lateHold.ts). */
export function decide(
  s: RolloutState,
  progress: WaveProgress | null,
  nowMs: number,
  listLimit = 1_000,
  hold: LateHold = noHold,
): Decision {
  // A rollback's steps are decideRollback's (rollback.ts); a halt under rollbackOnHalt begins one.
  if (s.rollback !== null) return { kind: 'wait', untilMs: null, why: s.status === 'rollingBack' ? 'rolling back' : s.status };
  const policy = rollbackPolicy(s);
  if (s.status === 'halted' && s.halted !== null && policy !== 'none') return { kind: 'startRollback', scope: policy, wave: s.halted.wave };
  if (isTerminal(s.status)) return { kind: 'wait', untilMs: null, why: s.status };
  if (s.status === 'paused') return { kind: 'wait', untilMs: null, why: 'paused' };
  if (!targetsComplete(s)) return { kind: 'wait', untilMs: null, why: 'targets still being listed' };

  if (s.current === 0) {
    const first = s.waves[0];
    if (first === undefined) return { kind: 'wait', untilMs: null, why: 'no wave planned' };
    return { kind: 'startWave', wave: 1, from: first.from, to: first.to };
  }
  const w = s.waves[s.current - 1];
  if (w === undefined) return { kind: 'wait', untilMs: null, why: 'unknown wave' };

  if (w.completed !== null) {
    const next = s.waves[s.current];
    if (next === undefined) return { kind: 'complete', data: { done: s.done, failed: s.failed, superseded: s.superseded } };
    const opensAt = Date.parse(w.completed.completedAt) + s.started.pauseMs;
    if (nowMs < opensAt) return { kind: 'wait', untilMs: opensAt, why: `pause before wave ${next.wave}` };
    if (s.started.gate !== undefined && !(s.gate?.wave === next.wave && s.gate.passed)) return { kind: 'gate', wave: next.wave };
    return { kind: 'startWave', wave: next.wave, from: next.from, to: next.to };
  }

  if (progress === null || progress.wave !== w.wave) return { kind: 'wait', untilMs: null, why: 'progress not known yet' };
  // A superseded node is not done: under 'fail' it is a failure of class 'superseded', under
  // 'hold' it keeps the wave open. Either way it never counts towards the wave's completion.
  const supersededFail = supersededPolicy(s) === 'fail';
  const criteria = criteriaOf(s.started);
  const planned = s.started.criteria !== undefined;
  const before = completedTally(s);
  const supersededFailures = (): RolloutFailure[] =>
    supersededFail
      ? progress
          .supersededNodes()
          .map((node) => ({ node, reason: 'superseded' as const, detail: 'sent a newer declaration from elsewhere' }))
      : [];
  const seen = (): RolloutFailure[] => cap([...progress.failures, ...supersededFailures()], listLimit);
  const halt = (t: Tripped, failed: RolloutFailure[]): Decision => ({
    kind: 'halt',
    data: {
      wave: w.wave,
      failures: t.failures,
      maxFailures: t.allowed,
      failed,
      why: 'overBudget',
      ...(planned
        ? {
            criterion: {
              asGiven: t.criterion.asGiven,
              classes: [...t.criterion.classes],
              failures: t.failures,
              allowed: t.allowed,
              settled: t.settled,
            },
          }
        : {}),
    },
  });
  // The criteria first: a failure seen halts the rollout before anything more is sent.
  const now = addTally(before, openTally(progress, supersededFail, null));
  const over = tripped(criteria, now);
  if (over !== null) return halt(over, seen());
  if (progress.unsentCount > 0) {
    // A metered plan sends no more than its allowance by now, counted from the first wave's start.
    const meter = meterOf(s.started);
    const t0 = s.waves[0]?.startedAt ?? null;
    if (meter === null || t0 === null) return { kind: 'send', wave: w.wave, nodes: progress.unsent };
    const reached = s.sends.size + s.skipped.size;
    const room = allowance(meter, nowMs - Date.parse(t0)) - reached;
    if (room <= 0) {
      const at = Date.parse(t0) + allowedAt(meter, reached + 1);
      return { kind: 'wait', untilMs: at, why: `sends metered: the next at ${new Date(at).toISOString()}` };
    }
    return { kind: 'send', wave: w.wave, nodes: progress.unsent.slice(0, room) };
  }
  const held: Decision | null =
    !supersededFail && progress.superseded > 0
      ? {
          kind: 'wait',
          untilMs: null,
          why: `${progress.superseded} superseded node(s) hold wave ${w.wave}: abort the rollout, or send them its spec again`,
        }
      : null;
  const settle = (late: Late | null): Decision => {
    if (held !== null) return held;
    const extra = late?.failures ?? [];
    const extraCount = late === null ? 0 : late.timeout + late.silent;
    const wave = openTally(progress, supersededFail, late);
    // A wave completes only on proof: with no node done, nothing shows the spec works anywhere,
    // and the next wave must not open to more nodes on failures the criteria happened to allow.
    // A wave whose every node was skipped (held or pinned) settled nothing either way: it
    // completes with nothing done, and the next wave still has to prove the spec on its own.
    const settledAny = progress.failureCount + extraCount + progress.superseded > 0;
    if (progress.done === 0 && !settledAny && progress.skipped > 0) {
      return {
        kind: 'completeWave',
        data: {
          wave: w.wave,
          done: 0,
          failed: 0,
          superseded: 0,
          failures: [],
          supersededNodes: [],
          byClass: {},
          skipped: progress.skipped,
        },
      };
    }
    if (progress.done === 0) {
      return {
        kind: 'halt',
        data: {
          wave: w.wave,
          failures: sumAll(addTally(before, wave)),
          maxFailures: s.started.maxFailures,
          failed: cap([...seen(), ...extra], listLimit),
          why: 'noneDone',
        },
      };
    }
    const { superseded: _superseded, ...byClass } = wave.byClass;
    return {
      kind: 'completeWave',
      data: {
        wave: w.wave,
        done: progress.done,
        failed: progress.failureCount + extraCount,
        superseded: progress.superseded,
        failures: cap([...progress.failures, ...extra], listLimit),
        supersededNodes: cap(progress.supersededNodes(), listLimit),
        byClass,
        ...(progress.skipped > 0 ? { skipped: progress.skipped } : {}),
      },
    };
  };
  if (progress.pending === 0) return settle(null);
  const deadline = waveDeadline(s, w);
  if (deadline === null || nowMs < deadline) {
    return { kind: 'wait', untilMs: deadline, why: `${progress.pending} node(s) of wave ${w.wave} still behind` };
  }
  // Nothing could be heard, or what was queued meanwhile may still be arriving: a node still behind proves nothing yet.
  if (holding(hold, nowMs)) return { kind: 'wait', untilMs: hold.fromMs, why: `wave ${w.wave}'s timeout held: ${hold.why}`, held: hold };
  // Past the timeout every node still behind is a failure: 'silent' if not connected, else 'timeout'.
  const judged = progress.late(nowMs);
  const late: Late = { ...judged, failures: heldFailures(judged.failures, hold, deadline) };
  const overLate = tripped(criteria, addTally(before, openTally(progress, supersededFail, late)));
  if (overLate !== null) return halt(overLate, cap([...seen(), ...late.failures], listLimit));
  return settle(late);
}

/**
 * How a wave's nodes stand, computed from scratch over its nodes: the reference the read side's
 * incremental tracker (src/readModel/rollouts.ts) is tested against, and what the CLI uses.
 * `graceMs` is the liveness grace a late node is judged silent by.
 */
export function waveProgress(
  s: RolloutState,
  wave: number,
  nodeOf: (node: string) => NodeFacts | undefined,
  limit = 1_000,
  graceMs = defaultSilentGraceMs,
): WaveProgress | null {
  const w = s.waves[wave - 1];
  if (w === undefined || w.startedAt === null) return null;
  const unsent: string[] = [];
  const failures: RolloutFailure[] = [];
  const pendingNodes: string[] = [];
  const superseded: string[] = [];
  const byClass = { refused: 0, degraded: 0, unsendable: 0 };
  let unsentCount = 0;
  let failureCount = 0;
  let done = 0;
  let skipped = 0;
  for (let i = w.from; i < w.to; i++) {
    const node = s.targets[i];
    if (node === undefined) continue;
    const state = nodeOf(node);
    const skip = s.skipped.get(node);
    const o = nodeOutcome(s.sends.get(node), skip, state);
    if (o === 'unsent') {
      unsentCount++;
      if (unsent.length < limit) unsent.push(node);
    } else if (o === 'pending') pendingNodes.push(node);
    else if (o === 'done') done++;
    else if (o === 'superseded') superseded.push(node);
    else if (o === 'skipped') skipped++;
    else {
      failureCount++;
      byClass[o as keyof typeof byClass]++;
      if (failures.length < limit) failures.push({ node, reason: o as RolloutFailure['reason'], detail: failureDetail(o, state, skip) });
    }
  }
  return {
    wave,
    unsent,
    unsentCount,
    pending: pendingNodes.length,
    done,
    superseded: superseded.length,
    skipped,
    failures,
    failureCount,
    failuresByClass: byClass,
    late: (nowMs) => lateOf(pendingNodes, nodeOf, nowMs, graceMs, limit),
    supersededNodes: () => superseded.slice(0, limit),
  };
}

/** The pending nodes as late failures: every one classified, the first `limit` listed. */
export function lateOf(
  pending: Iterable<string>,
  nodeOf: (node: string) => NodeFacts | undefined,
  nowMs: number,
  graceMs: number,
  limit: number,
): Late {
  const failures: RolloutFailure[] = [];
  let timeout = 0;
  let silent = 0;
  for (const node of pending) {
    const f = lateFailure(node, nodeOf(node), nowMs, graceMs);
    if (f.reason === 'silent') silent++;
    else timeout++;
    if (failures.length < limit) failures.push(f);
  }
  return { failures, timeout, silent };
}

/**
 * The rollout event that records a decision (all but `send`, which the driver records with the
 * declarations themselves), with its deterministic id and the time it was taken.
 */
export function eventOfDecision(
  s: RolloutState,
  d: Exclude<Decision, { kind: 'wait' } | { kind: 'send' } | { kind: 'rollbackSend' } | { kind: 'gate' }>,
  nowIso: string,
): WithId<RolloutEvent> {
  const rollout = s.id;
  switch (d.kind) {
    case 'startWave':
      return makeRolloutEvent('WaveStarted', { rollout, wave: d.wave, from: d.from, to: d.to, startedAt: nowIso });
    case 'completeWave':
      return makeRolloutEvent('WaveCompleted', { rollout, completedAt: nowIso, ...d.data });
    case 'halt':
      return makeRolloutEvent('RolloutHalted', { rollout, at: nowIso, ...d.data });
    case 'complete':
      return makeRolloutEvent('RolloutCompleted', { rollout, at: nowIso, ...d.data });
    case 'startRollback':
      return makeRolloutEvent('RollbackStarted', {
        rollout,
        scope: d.scope,
        wave: d.wave,
        by: 'engine',
        reason: `rollbackOnHalt ${d.scope}: halted in wave ${d.wave}`,
        at: nowIso,
      });
    case 'completeRollback':
      return makeRolloutEvent('RollbackCompleted', { rollout, at: nowIso, ...d.data });
  }
}
