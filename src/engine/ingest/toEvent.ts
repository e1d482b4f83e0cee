import { ConvergeError } from '../../core/errors.ts';
import { makeAliveSeen, makeReportReceived } from '../../core/events/index.ts';
import type { NodeEvent } from '../../core/events/index.ts';
import { parseAlive, parseReport } from '../../core/wire/index.ts';
import type { WireLimits } from '../../core/wire/index.ts';
import type { NewEvent } from '../../store/port.ts';
import type { Delivery } from '../../transport/port.ts';

// A delivery becomes at most one event, with a deterministic id (a redelivery makes the same
// one), or is refused: parsed at the edge, its sender checked against the node its body names
// (docs/design.md#1-contracts-with-the-node-side-fixed-real-nodes-depend-on-them). Pure: the
// clock and the node's last AliveSeen are given.

export type EventRules = Readonly<{
  limits: WireLimits;
  /** Accept a message with no user_id as sent by the node its body names (a mismatch is still refused). */
  trustMissingUserId: boolean;
  /** At most one AliveSeen per node per this many ms. */
  aliveResolutionMs: number;
}>;

/** The event of a delivery and the node it names; `event` null for an alive coalesced into the node's last AliveSeen. */
export type Received = Readonly<{ node: string; event: NewEvent<NodeEvent> | null }>;

/** Throws unless the broker-validated sender (`user_id`) is the node the body names. */
export function checkSender(node: string, d: Delivery, trustMissingUserId: boolean): void {
  if (d.userId === null) {
    if (trustMissingUserId) return;
    throw new ConvergeError(
      'CONVERGE_ERR_USER_ID_MISSING',
      `${d.kind} for node ${JSON.stringify(node)} has no user_id; the sender is unknown`,
    );
  }
  if (d.userId !== node) {
    throw new ConvergeError(
      'CONVERGE_ERR_USER_ID_MISMATCH',
      `${d.kind} names node ${JSON.stringify(node)} but was sent by ${JSON.stringify(d.userId)}`,
    );
  }
}

/**
 * The event of a delivery received at `atMs`; throws a ConvergeError to refuse the delivery. With
 * `lastAliveMs` null an alive makes none (liveness is recorded as transitions, not per sign of
 * life). Otherwise, the rule of stores written before transitions: an alive within
 * `aliveResolutionMs` of the node's last AliveSeen makes none, at most one AliveSeen per node per
 * resolution, always the first after a gap.
 */
export function toEvent(
  d: Delivery,
  atMs: number,
  rules: EventRules,
  lastAliveMs: ((node: string) => number | undefined) | null,
): Received {
  if (d.routingKey !== d.kind) {
    throw new ConvergeError(
      'CONVERGE_ERR_ROUTING_KEY',
      `a message on the ${d.kind} queue arrived with routing key ${JSON.stringify(d.routingKey)}`,
    );
  }
  if (d.kind === 'report') {
    const report = parseReport(d.body, rules.limits);
    checkSender(report.node, d, rules.trustMissingUserId);
    const transport = { messageId: d.messageId, redelivered: d.redelivered, userId: d.userId };
    return { node: report.node, event: makeReportReceived(report, d.body, transport, atMs) };
  }
  const alive = parseAlive(d.body, rules.limits);
  checkSender(alive.node, d, rules.trustMissingUserId);
  // Liveness recorded as transitions: the alive itself makes no event (createIngest.ts asks the recorder).
  if (lastAliveMs === null) return { node: alive.node, event: null };
  const last = lastAliveMs(alive.node);
  if (last !== undefined && atMs - last < rules.aliveResolutionMs) return { node: alive.node, event: null };
  return { node: alive.node, event: makeAliveSeen(alive, atMs) };
}
