import { holdOf, nodeView } from '../../projections/index.ts';
import type { HoldMark, NodeState, NodeView } from '../../projections/index.ts';
import { createHoldsReader } from '../engine/holds.ts';
import type { HoldsReader } from '../engine/holds.ts';
import { currentLiveness } from '../readModel/liveObservation.ts';
import { nodeNotFound, withExactLastSeen } from '../readModel/queries.ts';
import type { ApiDeps } from './deps.ts';

// A node's state as the routes answer it: the read model's fold with the ingest's exact
// last-seen time (docs/design.md §2) and liveness as of now, and its hold and pin (docs/design.md §8).
// Without ingest, liveness is as `state?at=now` answers (liveObservation.ts): not-observed with the
// reason while the record shows no engine observing, else by the node's recorded transition.

/** A node as the API shows it: the fold's view, with the operator's hold and pin beside it. */
export type ApiNodeView = NodeView & Readonly<{ held: HoldMark | null; pinned: HoldMark | null }>;

export type NodeViews = Readonly<{
  now: () => number;
  withLastSeen: (state: NodeState) => NodeState;
  view: (state: NodeState, at?: number) => ApiNodeView;
  /** Holds and pins as the `holds` stream says: refresh before answering, `latest` within an answer. */
  holds: HoldsReader;
  /** Whether anyone observes liveness now (an engine without ingest reads the record): await before answering. */
  observation: () => Promise<void>;
  /** The node's state, or the one "node not found" error (404). */
  known: (node: string) => NodeState;
}>;

export function nodeViews(
  deps: Pick<ApiDeps, 'readModel' | 'lastSeen' | 'graceMs' | 'now' | 'store' | 'holds' | 'observation'>,
): NodeViews {
  const now = deps.now ?? Date.now;
  const withLastSeen = (st: NodeState): NodeState => withExactLastSeen(st, deps.lastSeen?.(st.node));
  const holds = deps.holds ?? createHoldsReader(deps.store);

  return {
    now,
    withLastSeen,
    holds,
    observation: () => deps.observation?.refresh() ?? Promise.resolve(),
    view: (st, at = now()) => {
      const seen = withLastSeen(st);
      const live = currentLiveness(deps.readModel, seen, at, deps.observation?.followsRecord() ?? false);
      return { ...nodeView(seen, at, deps.graceMs, live), ...holdOf(holds.latest(), st.node) };
    },
    known: (node) => {
      const st = deps.readModel.get(node);
      if (st === undefined) throw nodeNotFound(node);
      return st;
    },
  };
}
