import type { FleetSummary, FleetSummaryOptions, LivenessState, NodeState, NodeStatus } from '../../projections/index.ts';
import type { Recorded, RolloutEvent } from '../core/events/index.ts';
import type { NodeColumns } from '../store/index.ts';
import type { ExactLastSeen, LivenessCounts } from './livenessTracker.ts';
import type { DecodedStates } from './snapshot/decodeStates.ts';

// What the read model (readModel.ts) offers and hears: its interface, its options, its changes,
// the query of a page of nodes. Kept apart so the read model's file is its behaviour.

export type NodeChange = Readonly<{ node: string; position: bigint; state: NodeState; previous: NodeState | undefined; event: Recorded }>;
export type ChangeListener = (change: NodeChange) => void;
export type ChangeListenerOptions = Readonly<{
  /**
   * Called once, instead of the listener once per change, when a bulk catch-up (`catchUp`) has
   * published the states it folded. A listener registered without it hears every change: no bulk
   * catch-up starts while it listens, and one under way is published before it is added.
   */
  bulk?: () => void;
}>;
/** Hears each rollout event in its place among the node changes: src/readModel/rollouts.ts folds them. */
export type RolloutEventListener = (event: Recorded<RolloutEvent>) => void;

/**
 * The event a fold threw on, or one the store could not read (a type this Converge does not
 * know: `type` is then any string): the read model stopped before it.
 */
export type FoldFailure = Readonly<{ position: bigint; id: string; type: string; node: string; message: string }>;

export type ReadModelOptions = Readonly<{
  /** Silence after which a node is disconnected (docs/design.md; default 60 s). */
  graceMs?: number;
  /** The ingest's exact last-seen time (alive is coalesced in the store, docs/design.md): liveness counts use the newer. */
  lastSeen?: ExactLastSeen;
  /** Clock for judging liveness as events fold (tests inject one). */
  now?: () => number;
}>;

/** GET /v1/nodes: filters applied here, a page of `limit` after the node id `after`, in node id order. */
export type NodePageQuery = Readonly<{
  status?: NodeStatus | undefined;
  liveness?: LivenessState | undefined;
  spec?: string | undefined;
  digest?: string | undefined;
  /** Only node ids starting with this (the dashboard's id search). */
  prefix?: string | undefined;
  after?: string | undefined;
  limit: number;
}>;
export type NodePage = Readonly<{ states: readonly NodeState[]; total: number; next: string | null }>;

export type ReadModel = Readonly<{
  get: (node: string) => NodeState | undefined;
  has: (node: string) => boolean;
  nodes: () => IterableIterator<NodeState>;
  size: () => number;
  /** Position of the last event folded (null: nothing folded yet). */
  position: () => bigint | null;
  /**
   * Fold events in position order; events at or before `position()` are skipped (a replayed
   * batch changes nothing). The position moves only once an event's fold has succeeded: a fold
   * that throws leaves the model at the event before, records the failure and throws
   * CONVERGE_ERR_PROJECTION_FAILED naming the event — now and on every later call, so nothing
   * past it is ever folded (a retry once stepped over the event).
   */
  apply: (events: readonly Recorded[]) => void;
  /** The event the fold failed on, or null. */
  failure: () => FoldFailure | null;
  /**
   * Stop before an event the store cannot read, as before one whose fold threw: `apply` folds
   * nothing from now on, and the failure listeners hear it. No-op once stopped.
   */
  refuse: (f: FoldFailure) => void;
  /** Hear the failure once it happens (waiters stop waiting for what will not come). */
  onFailure: (listener: (f: FoldFailure) => void) => () => void;
  /** Hear every change (see ChangeListenerOptions for a bulk catch-up); returns the unsubscribe function. */
  onChange: (listener: ChangeListener, options?: ChangeListenerOptions) => () => void;
  /**
   * A cold start's catch-up (docs/design.md), from an empty model: fold `events` (position order, up to
   * `until`) into a working state per node (projections/node/nodeStateFast.ts) instead of a new state per
   * event, and publish each node's state once, at `endCatchUp`: the states `apply` would have
   * given (test/readModel/catchUp.property.test.ts). Until then the model shows what it showed
   * before. Returns false once it folds nothing more in bulk — the model was not empty, a listener
   * needs every change, an event past `until` or a rollout's event came, or the draft fold threw —
   * and the caller goes on with `apply` after `endCatchUp` (from `position()`: events not folded
   * here are folded there). A throw discards the whole catch-up, so `apply` meets the event again.
   */
  catchUp: (events: readonly Recorded[], until: bigint) => boolean;
  /**
   * `catchUp` on a page of columns (src/store/nodeColumns.ts: readNodeColumns), the cold start's
   * read: the same fold and the same stops, on typed fields instead of an event object per event.
   * `catchUp` itself puts its events in columns and comes here.
   */
  catchUpColumns: (page: NodeColumns, until: bigint) => boolean;
  /** Publish what `catchUp` folded: the nodes' states, the counters, the position; then each bulk listener's `bulk()`. */
  endCatchUp: () => void;
  /** Hear every rollout event as it is passed over (they fold into no node); returns the unsubscribe function. */
  onRolloutEvent: (listener: RolloutEventListener) => () => void;
  /** Hear that an event of the observation stream was folded (who observes may have changed: liveObservation.ts); never throw. */
  onObservation: (listener: () => void) => () => void;
  /**
   * Replace the whole model (snapshot restore). From a snapshot read in place (DecodedStates,
   * snapshot/decodeStates.ts) the model takes over its node ids and slots, counts every node from its
   * columns, and builds a node's state the first time it is asked for (get, nodes, page, a
   * fold), then keeps it: the same states, built at first use instead of all at start.
   * `transitions`: each state's latest recorded liveness transition in the same order
   * (snapshot/transitions.ts's codes), when the snapshot keeps them.
   */
  restore: (states: Iterable<NodeState> | DecodedStates, position: bigint | null, transitions?: Uint8Array | null) => void;
  /** Overwrite one node's state without an event: for restore and for tests that tamper on purpose. */
  set: (state: NodeState) => void;
  /**
   * A page of nodes in node id order after `after`, with the filters applied and the `total`
   * matching: sorted slots and a binary search for the cursor, so a page costs its own size
   * plus one pass over typed columns for the total (GET /v1/nodes once built, sorted and sliced the
   * whole fleet per request).
   */
  page: (query: NodePageQuery, now: number) => NodePage;
  /** GET /v1/fleet from counters kept as events fold (fleetTally.ts, livenessTracker.ts). */
  fleet: (now: number, options?: FleetSummaryOptions) => FleetSummary;
  /** Nodes by status × liveness as of `now` (the converge_nodes gauges). */
  liveness: (now: number) => LivenessCounts;
  /** Why this view does not observe liveness now (docs/design.md §3 "Not observed"), or null: it does. */
  unobserved: () => string | null;
  /** Unobserved (a reason): every node's liveness, in counts, pages and views, is not-observed (liveObservation.ts). */
  setUnobserved: (reason: string | null) => void;
  /** Judge liveness by each node's recorded transition where it has one (an engine not observing itself, liveObservation.ts); `on` false: by grace again. */
  followRecord: (on?: boolean) => void;
  /** The node's latest recorded transition, folded here or restored (none from a snapshot of format 5 or older, until its next one). */
  transitionOf: (node: string) => 'heard' | 'silent' | null;
}>;
