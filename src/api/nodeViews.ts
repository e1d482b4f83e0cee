import { nodeView } from '../../projections/index.ts';
import type { NodeState, NodeView } from '../../projections/index.ts';
import { nodeNotFound, withExactLastSeen } from '../readModel/queries.ts';
import type { ApiDeps } from './deps.ts';

// A node's state as the routes answer it: the read model's fold with the ingest's exact
// last-seen time (docs/design.md §2) and liveness as of now.

export type NodeViews = Readonly<{
  now: () => number;
  withLastSeen: (state: NodeState) => NodeState;
  view: (state: NodeState, at?: number) => NodeView;
  /** The node's state, or the one "node not found" error (404). */
  known: (node: string) => NodeState;
}>;

export function nodeViews(deps: Pick<ApiDeps, 'readModel' | 'lastSeen' | 'graceMs' | 'now'>): NodeViews {
  const now = deps.now ?? Date.now;
  const withLastSeen = (st: NodeState): NodeState => withExactLastSeen(st, deps.lastSeen?.(st.node));
  return {
    now,
    withLastSeen,
    view: (st, at = now()) => nodeView(withLastSeen(st), at, deps.graceMs),
    known: (node) => {
      const st = deps.readModel.get(node);
      if (st === undefined) throw nodeNotFound(node);
      return st;
    },
  };
}
