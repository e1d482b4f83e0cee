import type { Liveness } from './liveness.ts';
import { later, serialOfSent } from './nodeState.ts';
import type { NodeState } from './nodeState.ts';

// Kubernetes-style conditions (docs/api.md#conditions): why a node is or is not converged, caught
// up and connected, in words a program can switch on. A pure function of the folded state and the
// liveness already judged for it, so every reader (API, CLI, replay) gives the same words. Each
// lastTransitionTime is a time carried by an event of the fold (a send's sentAt, a report's
// receivedAt, the last sign of life), never the time of the read.

export const conditionTypes = ['Converged', 'CaughtUp', 'Connected'] as const;
export type ConditionType = (typeof conditionTypes)[number];

export const conditionStatuses = ['True', 'False', 'Unknown'] as const;
export type ConditionStatus = (typeof conditionStatuses)[number];

/** The one closed list of reasons, for every type (docs/api.md#conditions says which type gives which). */
export const conditionReasons = [
  // Converged and CaughtUp, while the latest report does not name the latest send:
  'NotDeclared',
  'NotReported',
  'StaleReport',
  'UnknownDigest',
  'LegacyReport',
  // CaughtUp once it does:
  'Acknowledged',
  // Converged once it does:
  'Refused',
  'ResourcesFailed',
  'ResourcesMissing',
  'Converged',
  // Connected:
  'Heard',
  'Silent',
  'NeverSeen',
  'NotObserved',
] as const;
export type ConditionReason = (typeof conditionReasons)[number];

export type Condition = Readonly<{
  type: ConditionType;
  status: ConditionStatus;
  reason: ConditionReason;
  message: string;
  /** When the event that made the condition what it is happened; null when no event of the fold says (nothing sent, never seen). */
  lastTransitionTime: string | null;
}>;

export type ConditionInput = Pick<NodeState, 'sent' | 'reported' | 'earlierSends' | 'missing' | 'caughtUp'>;

type Why = Readonly<{ reason: ConditionReason; message: string; at: string | null }>;

const short = (digest: string): string => digest.slice(0, 12);

/** Why the latest report does not name the latest send (the node is not caught up). */
function notCaughtUp(s: ConditionInput): Why {
  const { sent, reported: r } = s;
  if (sent === null) {
    return { reason: 'NotDeclared', message: 'nothing has been sent to this node', at: null };
  }
  const latest = `sent serial ${sent.serial} at ${sent.sentAt}`;
  if (r === null) return { reason: 'NotReported', message: `${latest}, no report yet`, at: sent.sentAt };
  const serial = r.declared === null ? null : serialOfSent(s, r.declared);
  const named = serial === null ? 'an earlier declaration' : `serial ${serial}`;
  // The report named what was the latest send when it was folded: the newer send is not reported yet.
  if (r.class === 'matching') {
    return { reason: 'NotReported', message: `${latest}, not reported yet (last reported ${named} at ${r.receivedAt})`, at: sent.sentAt };
  }
  // Both facts make these reasons; the later of the two completed it.
  const at = later(sent.sentAt, r.receivedAt);
  if (r.class === 'stale') return { reason: 'StaleReport', message: `reported ${named} at ${r.receivedAt}, ${latest}`, at };
  if (r.class === 'unknown') {
    return {
      reason: 'UnknownDigest',
      message: `reported digest ${short(r.declared ?? '')}… at ${r.receivedAt}, never sent to this node; ${latest}`,
      at,
    };
  }
  return { reason: 'LegacyReport', message: `reported without a digest at ${r.receivedAt}; ${latest}`, at };
}

// Each condition is one object literal, fields in Kubernetes' order: spreading a shared `{type}`
// into each made the conditions most of a node view's cost (bench/api.ts reads 10,000 of them).
const condition = (
  type: ConditionType,
  status: ConditionStatus,
  reason: ConditionReason,
  message: string,
  lastTransitionTime: string | null,
): Condition => ({ type, status, reason, message, lastTransitionTime });

function converged(s: ConditionInput): Condition {
  if (!s.caughtUp || s.sent === null || s.reported === null) {
    const w = notCaughtUp(s);
    return condition('Converged', 'False', w.reason, w.message, w.at);
  }
  const { sent, reported: r } = s;
  const at = r.receivedAt;
  const of = `serial ${sent.serial}`;
  if (r.refused !== '') return condition('Converged', 'False', 'Refused', `${of} refused: ${r.refused}`, at);
  const failed = Object.entries(r.failed);
  if (failed.length > 0) {
    const list = failed.map(([id, why]) => `${id}: ${why}`).join('; ');
    return condition('Converged', 'False', 'ResourcesFailed', `${of}: ${list}`, at);
  }
  if (s.missing.length > 0) {
    return condition('Converged', 'False', 'ResourcesMissing', `${of}: neither applied nor failed: ${s.missing.join(', ')}`, at);
  }
  return condition('Converged', 'True', 'Converged', `${of} applied (${sent.resourceIds.length} resources), reported at ${at}`, at);
}

function caughtUp(s: ConditionInput): Condition {
  if (!s.caughtUp || s.sent === null || s.reported === null) {
    const w = notCaughtUp(s);
    return condition('CaughtUp', 'False', w.reason, w.message, w.at);
  }
  const { sent, reported: r } = s;
  // acknowledgedAt is the first matching report; a report folded before its send was (a digest
  // reported, then sent) leaves it null, and then the later of the two made the node caught up.
  const at = sent.acknowledgedAt ?? later(sent.sentAt, r.receivedAt);
  return condition('CaughtUp', 'True', 'Acknowledged', `reported serial ${sent.serial} (sent at ${sent.sentAt}) first at ${at}`, at);
}

function connected(l: Liveness): Condition {
  const at = l.lastSeenAt;
  switch (l.state) {
    case 'connected':
      return condition('Connected', 'True', 'Heard', `last heard at ${at}`, at);
    case 'disconnected':
      return condition('Connected', 'False', 'Silent', `silent since ${at}`, at);
    case 'never-seen':
      return condition('Connected', 'False', 'NeverSeen', 'never heard from', at);
    case 'not-observed':
      return condition(
        'Connected',
        'Unknown',
        'NotObserved',
        `${l.reason ?? 'no engine was observing then'}${at === null ? '' : `; last heard at ${at}`}`,
        at,
      );
  }
}

/** The node's conditions, in the order of `conditionTypes`. */
export function nodeConditions(s: ConditionInput, liveness: Liveness): readonly Condition[] {
  return [converged(s), caughtUp(s), connected(liveness)];
}
