import type { HoldEvent, Recorded } from '../src/core/events/index.ts';

// The fold of the `holds` stream (docs/design.md §8 "Holds and pins"): which nodes are held and
// which are pinned now, each with who, why and since when. A hold and a pin are independent; a
// second hold of a held node keeps the first (the node has been held since then).

export type HoldMark = Readonly<{ by: string; reason: string; at: string }>;
export type NodeHold = Readonly<{ held: HoldMark | null; pinned: HoldMark | null }>;

export type Holds = Readonly<{
  /** Nodes with a hold or a pin in force (a node released and unpinned is dropped). */
  nodes: ReadonlyMap<string, NodeHold>;
  /** Revision of the last event folded in `holds` (-1n: none). */
  revision: bigint;
}>;

export const noHolds: Holds = { nodes: new Map(), revision: -1n };
const free: NodeHold = { held: null, pinned: null };

export const holdOf = (h: Holds, node: string): NodeHold => h.nodes.get(node) ?? free;

/** Fold events of the `holds` stream in order; the map is copied, so an earlier state stays as it was. */
export function foldHolds(h: Holds, events: readonly Recorded<HoldEvent>[]): Holds {
  if (events.length === 0) return h;
  const nodes = new Map(h.nodes);
  let revision = h.revision;
  for (const e of events) {
    if (e.revision <= revision) continue;
    revision = e.revision;
    const was = nodes.get(e.data.node) ?? free;
    const mark: HoldMark = { by: e.data.by, reason: e.data.reason, at: e.data.at };
    const next: NodeHold =
      e.type === 'NodeHeld'
        ? { ...was, held: was.held ?? mark }
        : e.type === 'NodeReleased'
          ? { ...was, held: null }
          : e.type === 'NodePinned'
            ? { ...was, pinned: was.pinned ?? mark }
            : { ...was, pinned: null };
    if (next.held === null && next.pinned === null) nodes.delete(e.data.node);
    else nodes.set(e.data.node, next);
  }
  return { nodes, revision };
}
