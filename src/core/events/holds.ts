import { z } from 'zod';
import type { Event } from './events.ts';
import { uuidV5 } from './ids.ts';

// docs/design.md §8 "Holds and pins": an operator's hold (no rollout sends to the node) and pin (the
// node keeps its spec: rollouts skip it, a direct send is refused without --force). They are
// recorded in one stream of their own, `holds`, as observation spans are: the node fold, its
// snapshot columns and the stores' columnar reads stay as they are, and every hold in force is one
// short read (src/engine/holds.ts).

const iso = z.string().refine((s) => !Number.isNaN(Date.parse(s)), 'not an ISO 8601 time');

const holdData = z.object({
  node: z.string().min(1),
  /** Who asked: the operator (CLI) or `api token <id>`. */
  by: z.string(),
  /** Why, for the record (may be empty). */
  reason: z.string(),
  at: iso,
});

export type HoldEventData = Readonly<z.infer<typeof holdData>>;
export type NodeHeld = Event<'NodeHeld', HoldEventData>;
export type NodeReleased = Event<'NodeReleased', HoldEventData>;
export type NodePinned = Event<'NodePinned', HoldEventData>;
export type NodeUnpinned = Event<'NodeUnpinned', HoldEventData>;
export type HoldEvent = NodeHeld | NodeReleased | NodePinned | NodeUnpinned;
export type HoldEventType = HoldEvent['type'];

export const holdEventTypes = ['NodeHeld', 'NodeReleased', 'NodePinned', 'NodeUnpinned'] as const satisfies readonly HoldEventType[];
export const holdEventDataSchemas = { NodeHeld: holdData, NodeReleased: holdData, NodePinned: holdData, NodeUnpinned: holdData } as const;

/** The one stream holds and pins are recorded in (no node stream: its prefix is `node-`). */
export const holdsStream = 'holds';

/**
 * Named by the type, the node and the revision of the `holds` stream it follows: a retried append
 * is a no-op, and holding a node again after its release records an event of its own.
 */
export function makeHoldEvent(
  type: HoldEventType,
  data: HoldEventData,
  afterRevision: bigint | null,
): HoldEvent & Readonly<{ id: string }> {
  return { id: uuidV5(`${type}/${data.node}/${afterRevision ?? 'none'}`), type, data } as HoldEvent & Readonly<{ id: string }>;
}
