import { makeRolloutEvent } from '../events/index.ts';
import type { RolloutCompletedData, RolloutEvent, RolloutFailure, RolloutHaltedData, WaveCompletedData, WithId } from '../events/index.ts';
import { failureDetail, nodeOutcome } from './outcome.ts';
import { isTerminal, supersededPolicy, targetsComplete, waveDeadline } from './state.ts';
import type { NodeFacts, RolloutState } from './state.ts';

// The driver's decision: a pure function of the folded rollout, how the open wave's
// nodes stand, and the time. The driver (src/engine/rolloutDriver.ts) carries it out, records
// it, and asks again once the record is folded.

/** How the open wave's nodes stand now: kept by the read side (src/readModel/rollouts.ts). */
export type WaveProgress = Readonly<{
  wave: number;
  /** Nodes of the wave not sent to yet, in wave order (at most `limit` of them). */
  unsent: readonly string[];
  unsentCount: number;
  pending: number;
  done: number;
  superseded: number;
  /** Refused, degraded or unsendable now, with details. */
  failures: readonly RolloutFailure[];
  failureCount: number;
  /** The pending nodes with details, listed when the timeout turns them into failures (at most `limit`). */
  pendingFailures: () => readonly RolloutFailure[];
  supersededNodes: () => readonly string[];
}>;

export type Decision =
  | Readonly<{ kind: 'wait'; untilMs: number | null; why: string }>
  | Readonly<{ kind: 'startWave'; wave: number; from: number; to: number }>
  | Readonly<{ kind: 'send'; wave: number; nodes: readonly string[] }>
  | Readonly<{ kind: 'completeWave'; data: Omit<WaveCompletedData, 'rollout' | 'completedAt'> }>
  | Readonly<{ kind: 'halt'; data: Omit<RolloutHaltedData, 'rollout' | 'at'> }>
  | Readonly<{ kind: 'complete'; data: Omit<RolloutCompletedData, 'rollout' | 'at'> }>;

const cap = <T>(xs: readonly T[], n: number): T[] => (xs.length > n ? xs.slice(0, n) : [...xs]);

/** Failures spent of the budget over the completed waves: superseded nodes too under 'fail'. */
export const budgetUsed = (s: Pick<RolloutState, 'started' | 'failed' | 'superseded'>): number =>
  s.failed + (supersededPolicy(s) === 'fail' ? s.superseded : 0);

export function decide(s: RolloutState, progress: WaveProgress | null, nowMs: number, listLimit = 1_000): Decision {
  if (isTerminal(s.status)) return { kind: 'wait', untilMs: null, why: s.status };
  if (s.status === 'paused') return { kind: 'wait', untilMs: null, why: 'paused' };
  if (!targetsComplete(s)) return { kind: 'wait', untilMs: null, why: 'targets still being listed' };
  const { maxFailures } = s.started;

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
    return { kind: 'startWave', wave: next.wave, from: next.from, to: next.to };
  }

  if (progress === null || progress.wave !== w.wave) return { kind: 'wait', untilMs: null, why: 'progress not known yet' };
  // A superseded node is not done: under 'fail' it spends the budget like any failure, under
  // 'hold' it keeps the wave open. Either way it never counts towards the wave's completion.
  const supersededFail = supersededPolicy(s) === 'fail';
  const supersededFailures = (): RolloutFailure[] =>
    supersededFail
      ? progress
          .supersededNodes()
          .map((node) => ({ node, reason: 'superseded' as const, detail: 'sent a newer declaration from elsewhere' }))
      : [];
  const seen = (): RolloutFailure[] => cap([...progress.failures, ...supersededFailures()], listLimit);
  // The budget first: a failure seen halts the rollout before anything more is sent.
  const failures = budgetUsed(s) + progress.failureCount + (supersededFail ? progress.superseded : 0);
  if (failures > maxFailures) {
    return { kind: 'halt', data: { wave: w.wave, failures, maxFailures, failed: seen(), why: 'overBudget' } };
  }
  if (progress.unsentCount > 0) return { kind: 'send', wave: w.wave, nodes: progress.unsent };
  const held: Decision | null =
    !supersededFail && progress.superseded > 0
      ? {
          kind: 'wait',
          untilMs: null,
          why: `${progress.superseded} superseded node(s) hold wave ${w.wave}: abort the rollout, or send them its spec again`,
        }
      : null;
  const settle = (extra: readonly RolloutFailure[], extraCount: number): Decision => {
    if (held !== null) return held;
    // A wave completes only on proof: with no node done, nothing shows the spec works anywhere,
    // and the next wave must not open to more nodes on failures the budget happened to allow.
    if (progress.done === 0) {
      return {
        kind: 'halt',
        data: {
          wave: w.wave,
          failures: failures + extraCount,
          maxFailures,
          failed: cap([...seen(), ...extra], listLimit),
          why: 'noneDone',
        },
      };
    }
    return {
      kind: 'completeWave',
      data: {
        wave: w.wave,
        done: progress.done,
        failed: progress.failureCount + extraCount,
        superseded: progress.superseded,
        failures: cap([...progress.failures, ...extra], listLimit),
        supersededNodes: cap(progress.supersededNodes(), listLimit),
      },
    };
  };
  if (progress.pending === 0) return settle([], 0);
  const deadline = waveDeadline(s, w);
  if (deadline === null || nowMs < deadline) {
    return { kind: 'wait', untilMs: deadline, why: `${progress.pending} node(s) of wave ${w.wave} still behind` };
  }
  // Past the timeout every node still behind counts against the budget.
  const late = progress.pendingFailures();
  if (failures + progress.pending > maxFailures) {
    return {
      kind: 'halt',
      data: {
        wave: w.wave,
        failures: failures + progress.pending,
        maxFailures,
        failed: cap([...seen(), ...late], listLimit),
        why: 'overBudget',
      },
    };
  }
  return settle(late, progress.pending);
}

/**
 * How a wave's nodes stand, computed from scratch over its nodes: the reference the read side's
 * incremental tracker (src/readModel/rollouts.ts) is tested against, and what the CLI uses.
 */
export function waveProgress(
  s: RolloutState,
  wave: number,
  nodeOf: (node: string) => NodeFacts | undefined,
  limit = 1_000,
): WaveProgress | null {
  const w = s.waves[wave - 1];
  if (w === undefined || w.startedAt === null) return null;
  const unsent: string[] = [];
  const failures: RolloutFailure[] = [];
  const pendingNodes: string[] = [];
  const superseded: string[] = [];
  let unsentCount = 0;
  let failureCount = 0;
  let done = 0;
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
    else {
      failureCount++;
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
    failures,
    failureCount,
    pendingFailures: () =>
      pendingNodes
        .slice(0, limit)
        .map((node) => ({ node, reason: 'timeout' as const, detail: failureDetail('pending', nodeOf(node), undefined) })),
    supersededNodes: () => superseded.slice(0, limit),
  };
}

/**
 * The rollout event that records a decision (all but `send`, which the driver records with the
 * declarations themselves), with its deterministic id and the time it was taken.
 */
export function eventOfDecision(
  s: RolloutState,
  d: Exclude<Decision, { kind: 'wait' } | { kind: 'send' }>,
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
  }
}
