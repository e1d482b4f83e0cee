import { z } from 'zod';
import type { Event } from './events.ts';
import { uuidV5 } from './ids.ts';

// docs/design.md §2 "Retiring a node": an operator's record that a decommissioned node has left
// the fleet. It goes in the node's own stream, so the node's history stays whole and readable;
// the folds keep the node out of the fleet's views and counts until a later send brings it back.

const iso = z.string().refine((s) => !Number.isNaN(Date.parse(s)), 'not an ISO 8601 time');

export const nodeRetiredData = z.object({
  node: z.string().min(1),
  at: iso,
  /** Why, for the record (may be empty). */
  reason: z.string(),
});

export type NodeRetiredData = Readonly<z.infer<typeof nodeRetiredData>>;
export type NodeRetired = Event<'NodeRetired', NodeRetiredData>;

export const retirementEventDataSchemas = { NodeRetired: nodeRetiredData } as const;

/**
 * Named by the node and the stream revision it was retired after: a retried append is a no-op, and
 * a node retired again after a send brought it back gets an event of its own.
 */
export const nodeRetiredId = (node: string, afterRevision: bigint): string => uuidV5(`NodeRetired/${node}/${afterRevision}`);

export function makeNodeRetired(node: string, afterRevision: bigint, at: Date, reason: string): NodeRetired & Readonly<{ id: string }> {
  return { id: nodeRetiredId(node, afterRevision), type: 'NodeRetired', data: { node, at: at.toISOString(), reason } };
}
