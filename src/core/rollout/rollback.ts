import type { RolloutFailure } from '../events/index.ts';
import { lateOf } from './decide.ts';
import type { Decision } from './decide.ts';
import { heldFailures, holding, noHold } from './lateHold.ts';
import type { LateHold } from './lateHold.ts';
import { failureDetail, nodeOutcome } from './outcome.ts';
import type { NodeOutcome } from './outcome.ts';
import { rollbackPolicy } from './state.ts';
import type { NodeFacts, RolloutState } from './state.ts';

// A rollback (docs/design.md §8, "Rollback"): every node this rollout sent its spec to (the
// rolled-back wave's, for scope 'wave') is sent the declaration it had before, and counts as rolled
// back only when its report names that new declaration's digest — the wave's rule, with the
// restored declaration in place of ours. Nodes never sent our spec get nothing.

/** A halted rollout whose plan rolls back on halt, and whose rollback has not begun: the driver keeps it. */
export const owesRollback = (s: RolloutState): boolean => s.status === 'halted' && s.rollback === null && rollbackPolicy(s) !== 'none';

/** The nodes a rollback covers, in wave order: those sent this rollout's spec, of its wave for scope 'wave'. */
export function rollbackTargets(s: RolloutState): string[] {
  const r = s.rollback;
  if (r === null) return [];
  const out: string[] = [];
  for (const node of s.targets) {
    const send = s.sends.get(node);
    if (send !== undefined && (r.started.scope === 'all' || send.wave === r.started.wave)) out.push(node);
  }
  return out;
}

/** How a node stands in the rollback: the rule of a wave (nodeOutcome) against the rollback's send; 'unsendable' is skipped. */
export function rollbackOutcome(s: RolloutState, node: string, facts: NodeFacts | undefined): NodeOutcome {
  const r = s.rollback;
  if (r === null) return 'unsent';
  const skip = r.skipped.get(node);
  const send = r.sends.get(node);
  return nodeOutcome(
    send === undefined ? undefined : { wave: send.wave, serial: send.serial, digest: send.digest, sentAt: send.sentAt },
    skip === undefined ? undefined : { wave: 0, ...skip },
    facts,
  );
}

export type RollbackProgress = Readonly<{
  targets: number;
  /** Targets not sent a rollback yet, in wave order (at most `limit`). */
  unsent: readonly string[];
  unsentCount: number;
  pending: readonly string[];
  done: number;
  /** Refused, degraded or superseded on the restored declaration. */
  failures: readonly RolloutFailure[];
  failureCount: number;
  skipped: number;
}>;

/** Where the rollback stands, from the node fold's states. */
export function rollbackProgress(s: RolloutState, nodeOf: (node: string) => NodeFacts | undefined, limit = 1_000): RollbackProgress {
  const targets = rollbackTargets(s);
  const unsent: string[] = [];
  const pending: string[] = [];
  const failures: RolloutFailure[] = [];
  let unsentCount = 0;
  let done = 0;
  let failureCount = 0;
  let skipped = 0;
  for (const node of targets) {
    const facts = nodeOf(node);
    const o = rollbackOutcome(s, node, facts);
    if (o === 'unsent') {
      unsentCount++;
      if (unsent.length < limit) unsent.push(node);
    } else if (o === 'pending') pending.push(node);
    else if (o === 'done') done++;
    else if (o === 'unsendable') skipped++;
    else {
      failureCount++;
      const detail = o === 'superseded' ? 'sent a newer declaration from elsewhere after the rollback' : failureDetail(o, facts, undefined);
      if (failures.length < limit) failures.push({ node, reason: o as RolloutFailure['reason'], detail });
    }
  }
  return { targets: targets.length, unsent, unsentCount, pending, done, failures, failureCount, skipped };
}

/** When the rollback's nodes still behind count as failed (ms): the plan's wave timeout after its last send. */
export const rollbackDeadline = (s: RolloutState): number | null =>
  s.rollback?.lastSentAtMs == null ? null : s.rollback.lastSentAtMs + s.started.waveTimeoutMs;

/**
 * The driver's next step in a rollback: send the targets not sent yet, then wait until each has
 * reported its restored declaration's digest, or the timeout passed; then record the end.
 */
export function decideRollback(
  s: RolloutState,
  p: RollbackProgress,
  nowMs: number,
  nodeOf: (node: string) => NodeFacts | undefined,
  graceMs: number,
  listLimit = 1_000,
  hold: LateHold = noHold,
): Decision {
  const r = s.rollback;
  if (r === null || r.completed !== null || s.status !== 'rollingBack') return { kind: 'wait', untilMs: null, why: s.status };
  if (p.unsentCount > 0) return { kind: 'rollbackSend', nodes: p.unsent };
  const complete = (late: readonly RolloutFailure[], lateCount: number): Decision => ({
    kind: 'completeRollback',
    data: {
      done: p.done,
      failed: p.failureCount + lateCount,
      skipped: p.skipped,
      failures: [...p.failures, ...late].slice(0, listLimit),
    },
  });
  if (p.pending.length === 0) return complete([], 0);
  const deadline = rollbackDeadline(s);
  if (deadline === null || nowMs < deadline)
    return { kind: 'wait', untilMs: deadline, why: `${p.pending.length} node(s) not rolled back yet` };
  if (holding(hold, nowMs)) return { kind: 'wait', untilMs: hold.fromMs, why: `the rollback's timeout held: ${hold.why}`, held: hold };
  const late = lateOf(p.pending, nodeOf, nowMs, graceMs, listLimit);
  return complete(heldFailures(late.failures, hold, deadline), late.timeout + late.silent);
}
