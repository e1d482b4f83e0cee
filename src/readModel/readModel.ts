import { foldNode, initialNodeState } from '../../projections/index.ts';
import type { NodeState } from '../../projections/index.ts';
import type { Recorded } from '../events/index.ts';
import { nodeOfStream } from '../events/index.ts';

// The in-memory read model (DESIGN §3, §6): a mutable Map<node, NodeState> where each entry is
// replaced by the pure fold, never edited in place. Listeners hear every change synchronously,
// in position order, so `await` and SSE react the moment an event is folded — no polling.

export type NodeChange = Readonly<{ node: string; position: bigint; state: NodeState; previous: NodeState | undefined; event: Recorded }>;
export type ChangeListener = (change: NodeChange) => void;

export type ReadModel = Readonly<{
  get: (node: string) => NodeState | undefined;
  has: (node: string) => boolean;
  nodes: () => IterableIterator<NodeState>;
  size: () => number;
  /** Position of the last event folded (null: nothing folded yet). */
  position: () => bigint | null;
  /** Fold events in position order; events at or before `position()` are skipped (a replayed batch changes nothing). */
  apply: (events: readonly Recorded[]) => void;
  /** Hear every change; returns the unsubscribe function. */
  onChange: (listener: ChangeListener) => () => void;
  /** Replace the whole model (snapshot restore). */
  restore: (states: Iterable<NodeState>, position: bigint | null) => void;
  /** Overwrite one node's state without an event: for restore and for tests that tamper on purpose. */
  set: (state: NodeState) => void;
}>;

export function createReadModel(): ReadModel {
  const states = new Map<string, NodeState>();
  const listeners = new Set<ChangeListener>();
  let position: bigint | null = null;

  return {
    get: (node) => states.get(node),
    has: (node) => states.has(node),
    nodes: () => states.values(),
    size: () => states.size,
    position: () => position,
    apply(events) {
      for (const e of events) {
        if (position !== null && e.position <= position) continue;
        position = e.position;
        const node = nodeOfStream(e.stream) ?? e.data.node;
        const previous = states.get(node);
        const state = foldNode(previous ?? initialNodeState(node), e);
        states.set(node, state);
        if (listeners.size > 0) {
          const change: NodeChange = { node, position: e.position, state, previous, event: e };
          for (const l of [...listeners]) {
            try {
              l(change);
            } catch {
              // a listener (one SSE client, one await) must never break the fold for everyone
            }
          }
        }
      }
    },
    onChange(listener) {
      listeners.add(listener);
      return () => {
        listeners.delete(listener);
      };
    },
    restore(next, at) {
      states.clear();
      for (const s of next) states.set(s.node, s);
      position = at;
    },
    set(state) {
      states.set(state.node, state);
    },
  };
}
