import type { RolloutFailure } from '../events/index.ts';
import type { RolloutSend, RolloutSkip, NodeFacts } from './state.ts';

// The rule: how one node stands in this rollout, from the node fold alone.

export const nodeOutcomes = ['unsent', 'pending', 'done', 'refused', 'degraded', 'superseded', 'unsendable', 'skipped'] as const;
export type NodeOutcome = (typeof nodeOutcomes)[number];

export const isFailure = (o: NodeOutcome): boolean => o === 'refused' || o === 'degraded' || o === 'unsendable';

/**
 * The codes a rollout lists a node it did not send to by intent: an operator's hold or pin
 * (docs/design.md §8 "Holds and pins"), or under `asOf` a node sent nothing by then (nothing to
 * restore). Such a node is 'skipped', neither done nor failed, and spends no budget. Any other
 * code is a refused send ('unsendable', a failure).
 */
export const operatorSkipCodes = ['held', 'pinned', 'noneAsOf'] as const;
export const isOperatorSkip = (code: string): boolean => (operatorSkipCodes as readonly string[]).includes(code);

/**
 * A node is done when its latest report names the digest of the declaration this rollout sent
 * it and it is converged — the node fold's caughtUp, which is an equality of digests: a report
 * about an earlier declaration (stale), however late it arrives, leaves it pending. A node whose
 * latest send is newer than ours was superseded from elsewhere: not done, and not a failure.
 */
export function nodeOutcome(
  send: RolloutSend | undefined,
  skip: RolloutSkip | undefined,
  node: Pick<NodeFacts, 'sent' | 'status'> | undefined,
): NodeOutcome {
  if (skip !== undefined) return isOperatorSkip(skip.code) ? 'skipped' : 'unsendable';
  if (send === undefined) return 'unsent';
  // The read model has not folded our send yet (it is folded with the RolloutSent that names it).
  if (node === undefined || node.sent === null) return 'pending';
  // Serials grow by one per send to a node (docs/design.md §1): a later serial is a newer send. (By serial,
  // not by looking the digest up in the node's send history, which keeps only the last 8 sends.)
  if (node.sent.digest !== send.digest) return node.sent.serial > send.serial ? 'superseded' : 'pending';
  switch (node.status) {
    case 'converged':
      return 'done';
    case 'refused':
      return 'refused';
    case 'degraded':
      return 'degraded';
    default:
      return 'pending';
  }
}

/** What a failure list says about a node, for people (and for the events that record it). */
export function failureDetail(
  outcome: NodeOutcome,
  node: Pick<NodeFacts, 'reported' | 'missing'> | undefined,
  skip: RolloutSkip | undefined,
): string {
  const r = node?.reported ?? null;
  switch (outcome) {
    case 'unsendable':
    case 'skipped':
      return skip === undefined ? 'not sent' : `${skip.code}: ${skip.reason}`;
    case 'refused':
      return r === null ? 'refused' : `refused: ${r.refused}`;
    case 'degraded': {
      const failed = r === null ? [] : Object.entries(r.failed).map(([id, why]) => `${id} (${why})`);
      const missing = node?.missing ?? [];
      return [failed.length > 0 ? `failed ${failed.join(', ')}` : '', missing.length > 0 ? `missing ${missing.join(', ')}` : '']
        .filter((x) => x !== '')
        .join('; ');
    }
    default:
      if (r === null) return 'no report since the send';
      return `behind: the latest report names ${r.declared === null ? 'no digest' : r.declared.slice(0, 12)} (${r.class})`;
  }
}

/** The liveness grace (docs/design.md §3) when none is given: projections/node/liveness.ts's default. */
export const defaultSilentGraceMs = 60_000;

/**
 * Whether the node fold's liveness says the node is not connected at `nowMs`: never seen, or no
 * sign of life for longer than the grace. The same rule as livenessAt (projections/node/liveness.ts),
 * which the core cannot import; a test holds the two equal.
 */
export const notConnectedAt = (lastSeenAt: string | null, nowMs: number, graceMs: number): boolean =>
  lastSeenAt === null || nowMs - Date.parse(lastSeenAt) > graceMs;

/**
 * A node still behind when its wave timed out, as a failure: 'silent' when it was not connected
 * then (it went quiet, or was never heard from), else 'timeout' (connected, but not caught up).
 * Connected is the facts' `connected` where the record decided it, else the grace's answer.
 */
export function lateFailure(
  node: string,
  facts: Pick<NodeFacts, 'reported' | 'missing' | 'lastSeenAt' | 'connected'> | undefined,
  nowMs: number,
  graceMs: number,
): RolloutFailure {
  const lastSeenAt = facts?.lastSeenAt ?? null;
  const connected = facts?.connected;
  if (connected === undefined ? notConnectedAt(lastSeenAt, nowMs, graceMs) : !connected)
    return { node, reason: 'silent', detail: lastSeenAt === null ? 'silent: never seen' : `silent: no sign of life since ${lastSeenAt}` };
  return { node, reason: 'timeout', detail: failureDetail('pending', facts, undefined) };
}
