import { createFleetTally, createNodeDraft, foldNode, initialNodeState, publishDraft } from '../../projections/index.ts';
import type { FleetSummary, FleetSummaryOptions, LivenessState, NodeDraft, NodeState, NodeStatus } from '../../projections/index.ts';
import { ConvergeError } from '../core/errors.ts';
import type { DeclarationSent, Recorded, RolloutEvent } from '../core/events/index.ts';
import { isNodeEvent, nodeOfStream } from '../core/events/index.ts';
import { columnsOf, createNodeColumns, eventKind, streamNodeOf } from '../store/index.ts';
import type { NodeColumns } from '../store/index.ts';
import { foldEntry, internIds, internSpec } from './foldIntoDraftFast.ts';
import { createLivenessTracker } from './livenessTracker.ts';
import type { DecodedStates } from './snapshot/decodeStates.ts';
import type { ExactLastSeen, LivenessCounts } from './livenessTracker.ts';

// The in-memory read model (DESIGN §3, §6): a mutable Map<node, NodeState> where each entry is
// replaced by the pure fold, never edited in place. Listeners hear every change synchronously,
// in position order, so `await` and SSE react the moment an event is folded — no polling.

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
/** Hears each rollout event (issue 14) in its place among the node changes: src/readModel/rollouts.ts folds them. */
export type RolloutEventListener = (event: Recorded<RolloutEvent>) => void;

/** The event a fold threw on: the read model stopped before it (issue 13 item 2). */
export type FoldFailure = Readonly<{ position: bigint; id: string; type: Recorded['type']; node: string; message: string }>;

export type ReadModelOptions = Readonly<{
  /** Silence after which a node is disconnected (DESIGN §3; default 60 s). */
  graceMs?: number;
  /** The ingest's exact last-seen time (alive is coalesced in the store, DESIGN §2): liveness counts use the newer. */
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
  /** Only node ids starting with this (the dashboard's id search, issue 11). */
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
   * past it is ever folded (issue 13 item 2: a retry used to step over the event).
   */
  apply: (events: readonly Recorded[]) => void;
  /** The event the fold failed on, or null. */
  failure: () => FoldFailure | null;
  /** Hear the failure once it happens (waiters stop waiting for what will not come). */
  onFailure: (listener: (f: FoldFailure) => void) => () => void;
  /** Hear every change (see ChangeListenerOptions for a bulk catch-up); returns the unsubscribe function. */
  onChange: (listener: ChangeListener, options?: ChangeListenerOptions) => () => void;
  /**
   * A cold start's catch-up (DESIGN §6), from an empty model: fold `events` (position order, up to
   * `until`) into a working state per node (projections/nodeDraft.ts) instead of a new state per
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
  /**
   * Replace the whole model (snapshot restore). From a snapshot read in place (DecodedStates,
   * snapshot/decodeStates.ts) the model takes over its node ids and slots, counts every node from its
   * columns, and builds a node's state the first time it is asked for (get, nodes, page, a
   * fold), then keeps it: the same states, built at first use instead of all at start (issue 10).
   */
  restore: (states: Iterable<NodeState> | DecodedStates, position: bigint | null) => void;
  /** Overwrite one node's state without an event: for restore and for tests that tamper on purpose. */
  set: (state: NodeState) => void;
  /**
   * A page of nodes in node id order after `after`, with the filters applied and the `total`
   * matching: sorted slots and a binary search for the cursor, so a page costs its own size
   * plus one pass over typed columns for the total (GET /v1/nodes built, sorted and sliced the
   * whole fleet per request: 75 MB, 1.5 s at 100,000 nodes; issue 10).
   */
  page: (query: NodePageQuery, now: number) => NodePage;
  /** GET /v1/fleet from counters kept as events fold (fleetTally.ts, livenessTracker.ts). */
  fleet: (now: number, options?: FleetSummaryOptions) => FleetSummary;
  /** Nodes by status × liveness as of `now` (the converge_nodes gauges). */
  liveness: (now: number) => LivenessCounts;
}>;

const failedError = (f: FoldFailure, cause?: unknown): ConvergeError =>
  new ConvergeError(
    'CONVERGE_ERR_PROJECTION_FAILED',
    `the fold failed on ${f.type} ${f.id} (position ${f.position}, node ${JSON.stringify(f.node)}): ${f.message}; the read model stopped before it`,
    { details: { position: f.position.toString(), id: f.id, type: f.type, node: f.node }, ...(cause === undefined ? {} : { cause }) },
  );

// Nodes sent the same spec hold the same spec digest and resource ids: one string and one array
// for all of them instead of a copy each, as every event arrives with its own (memory per node,
// bench/scale.ts). Equal values, so the fold's result is the same (foldIntoDraftFast.ts keeps the tables).
function interned(e: Recorded<DeclarationSent>): Recorded<DeclarationSent> {
  const d = e.data;
  const spec = internSpec(d.specDigest);
  const ids = internIds(d.resourceIds);
  if (spec === d.specDigest && ids === d.resourceIds) return e;
  return { ...e, data: { ...d, specDigest: spec, resourceIds: ids as string[] } };
}

const isDecoded = (v: Iterable<NodeState> | DecodedStates): v is DecodedStates =>
  typeof (v as DecodedStates).state === 'function' && (v as DecodedStates).slots instanceof Map;

export function createReadModel(options: ReadModelOptions = {}): ReadModel {
  const clock = options.now ?? Date.now;
  // Dense slots: a node's slot indexes its state and the typed columns of the liveness tracker,
  // so pages and counts scan arrays rather than a Map of objects.
  let slotOf = new Map<string, number>();
  let ids: string[] = [];
  const states: NodeState[] = [];
  /** A restored snapshot's states not built yet (`states` has a hole for each), and how many. */
  let unbuilt: DecodedStates | null = null;
  let holes = 0;

  /** A slot's state, built from the restored snapshot the first time it is asked for. */
  function stateAt(slot: number): NodeState {
    const s = states[slot];
    if (s !== undefined) return s;
    const built = unbuilt!.state(slot);
    states[slot] = built;
    if (--holes === 0) unbuilt = null;
    return built;
  }
  function buildAll(): void {
    if (unbuilt === null) return;
    for (let slot = 0; slot < states.length; slot++) if (states[slot] === undefined) stateAt(slot);
  }
  let order: Int32Array = new Int32Array(0);
  let tally = createFleetTally();
  const tracker = createLivenessTracker({
    ...(options.graceMs === undefined ? {} : { graceMs: options.graceMs }),
    ...(options.lastSeen === undefined ? {} : { exact: options.lastSeen }),
  });
  const listeners = new Set<ChangeListener>();
  /** The listeners as an array, made again only after one is added or removed (not a copy per event). */
  let listenerArray: readonly ChangeListener[] | null = null;
  const listenerList = (): readonly ChangeListener[] => (listenerArray ??= [...listeners]);
  /** Listeners registered with a `bulk` callback, by listener. */
  const bulkListeners = new Map<ChangeListener, () => void>();
  /** A bulk catch-up's working states and position (null: none under way); `bulkOver`: no more bulk for this model. */
  let drafts: Map<string, NodeDraft> | null = null;
  let draftPosition: number | null = null;
  let bulkOver = false;
  const rolloutListeners = new Set<RolloutEventListener>();
  let position: bigint | null = null;
  let failed: FoldFailure | null = null;
  const failureListeners = new Set<(f: FoldFailure) => void>();

  /** Put a node's new state in place and keep the counters in step with it. */
  function place(slot: number, previous: NodeState | undefined, state: NodeState): void {
    states[slot] = state;
    // An alive changes lastSeenAt only: the fleet tally would subtract and add the same numbers.
    if (
      previous === undefined ||
      previous.status !== state.status ||
      previous.sent !== state.sent ||
      previous.caughtUp !== state.caughtUp ||
      previous.convergence !== state.convergence ||
      previous.anomalies !== state.anomalies
    ) {
      if (previous === undefined) tally.add(state);
      else tally.replace(previous, state);
    }
    if (previous === undefined || previous.status !== state.status || previous.lastSeenAt !== state.lastSeenAt) {
      tracker.update(slot, state.node, state.status, state.lastSeenAt, clock());
    }
  }

  function slotFor(node: string): number {
    let slot = slotOf.get(node);
    if (slot === undefined) {
      slot = ids.length;
      slotOf.set(node, slot);
      ids.push(node);
    }
    return slot;
  }

  /** Slots sorted by node id; nodes added since the last call are sorted and merged in (O(n), not a full sort). */
  function sorted(): Int32Array {
    if (order.length === ids.length) return order;
    const fresh = Array.from({ length: ids.length - order.length }, (_, i) => order.length + i).sort((a, b) =>
      ids[a]! < ids[b]! ? -1 : 1,
    );
    const merged = new Int32Array(ids.length);
    let i = 0;
    let j = 0;
    let k = 0;
    while (i < order.length && j < fresh.length) merged[k++] = ids[order[i]!]! < ids[fresh[j]!]! ? order[i++]! : fresh[j++]!;
    while (i < order.length) merged[k++] = order[i++]!;
    while (j < fresh.length) merged[k++] = fresh[j++]!;
    order = merged;
    return order;
  }

  /** Whether a bulk catch-up may fold now: starts one from an empty model, or says no more. */
  function bulkOpen(): boolean {
    if (bulkOver) return false;
    if (drafts === null) {
      // Only from nothing, and only while every listener can take the catch-up at once.
      if (position !== null || ids.length > 0 || failed !== null || bulkListeners.size < listeners.size) {
        bulkOver = true;
        return false;
      }
      drafts = new Map();
    }
    return true;
  }

  /** Drop what the bulk fold folded: `apply` folds from zero again (issue 13 item 2: it stops at a failing event). */
  function dropCatchUp(): false {
    drafts = null;
    draftPosition = null;
    bulkOver = true;
    return false;
  }

  let scratch: NodeColumns = createNodeColumns(0);
  function catchUp(events: readonly Recorded[], until: bigint): boolean {
    if (!bulkOpen()) return false;
    try {
      scratch = columnsOf(events, scratch);
    } catch {
      // An event the columns cannot take (malformed data) is one the draft fold would throw on.
      return dropCatchUp();
    }
    return catchUpColumns(scratch, until);
  }

  function catchUpColumns(c: NodeColumns, until: bigint): boolean {
    if (!bulkOpen()) return false;
    const ds = drafts!;
    const last = Number(until);
    for (let i = 0; i < c.length; i++) {
      const p = c.position[i]!;
      if (draftPosition !== null && p <= draftPosition) continue;
      // A rollout's event goes through `apply`, where the rollout view hears it among the node changes.
      if (p > last || c.kind[i] === eventKind.other) {
        bulkOver = true;
        return false;
      }
      const node = c.streamNode[i] ?? c.node[i]!;
      let d = ds.get(node);
      if (d === undefined) ds.set(node, (d = createNodeDraft(node)));
      try {
        foldEntry(d, c, i);
      } catch {
        // A half-folded draft is no state to serve: drop the catch-up; `apply` folds from zero
        // again, meets this event, and stops there as it does (issue 13 item 2).
        return dropCatchUp();
      }
      draftPosition = p;
    }
    return true;
  }

  function endCatchUp(): void {
    const ds = drafts;
    if (ds === null) return;
    drafts = null;
    bulkOver = true;
    for (const [node, d] of ds) {
      const slot = slotFor(node);
      place(slot, slot < states.length ? stateAt(slot) : undefined, publishDraft(d));
    }
    if (draftPosition !== null) position = BigInt(draftPosition);
    draftPosition = null;
    for (const bulk of [...bulkListeners.values()]) {
      try {
        bulk();
      } catch {
        // as for a listener: never break the fold for everyone
      }
    }
  }

  function page(query: NodePageQuery, now: number): NodePage {
    const slots = sorted();
    if (query.liveness !== undefined) tracker.counts(now);
    const { status, liveness, spec, digest, prefix, after } = query;
    const filtered = status !== undefined || liveness !== undefined || spec !== undefined || digest !== undefined || prefix !== undefined;
    // Id, status and liveness from the slot columns; the state itself only for a spec or digest.
    const matches = (slot: number): boolean => {
      if (prefix !== undefined && !ids[slot]!.startsWith(prefix)) return false;
      if (status !== undefined && tracker.statusOf(slot) !== status) return false;
      if (liveness !== undefined && tracker.livenessOf(slot) !== liveness) return false;
      if (spec === undefined && digest === undefined) return true;
      const st = stateAt(slot);
      if (spec !== undefined && st.sent?.specDigest !== spec) return false;
      if (digest !== undefined && st.sent?.digest !== digest && st.reported?.declared !== digest) return false;
      return true;
    };
    // First slot after the cursor: a binary search over the sorted ids.
    let lo = 0;
    if (after !== undefined) {
      let hi = slots.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (ids[slots[mid]!]! <= after) lo = mid + 1;
        else hi = mid;
      }
    }
    const out: NodeState[] = [];
    let k = lo;
    for (; k < slots.length && out.length < query.limit; k++) if (!filtered || matches(slots[k]!)) out.push(stateAt(slots[k]!));
    let more = false;
    for (; k < slots.length && !more; k++) more = !filtered || matches(slots[k]!);
    let total = slots.length;
    if (filtered) {
      total = 0;
      for (let i = 0; i < slots.length; i++) if (matches(i)) total++;
    }
    return { states: out, total, next: more && out.length > 0 ? out[out.length - 1]!.node : null };
  }

  return {
    get: (node) => {
      const slot = slotOf.get(node);
      return slot === undefined ? undefined : stateAt(slot);
    },
    has: (node) => slotOf.has(node),
    nodes: () => {
      buildAll();
      return states.values();
    },
    size: () => ids.length,
    position: () => position,
    apply(events) {
      if (drafts !== null) endCatchUp();
      for (const e of events) {
        if (position !== null && e.position <= position) continue;
        if (failed !== null) throw failedError(failed);
        // A rollout's event (issue 14): folded beside this model (rollouts.ts), never into a node.
        if (!isNodeEvent(e)) {
          position = e.position;
          for (const l of rolloutListeners) {
            try {
              l(e);
            } catch {
              // the rollout view must never break the node fold
            }
          }
          continue;
        }
        // The data's own node string when the stream is its node's (no slice of the stream per event).
        const named = (e.data as { node?: unknown } | null)?.node;
        const node = (typeof named === 'string' ? streamNodeOf(e.stream, named) : nodeOfStream(e.stream)) ?? e.data.node;
        const known = slotOf.get(node);
        const previous = known === undefined ? undefined : stateAt(known);
        let state: NodeState;
        try {
          state = foldNode(previous ?? initialNodeState(node), e.type === 'DeclarationSent' ? interned(e) : e);
        } catch (err) {
          failed = { position: e.position, id: e.id, type: e.type, node, message: err instanceof Error ? err.message : String(err) };
          for (const l of [...failureListeners]) {
            try {
              l(failed);
            } catch {
              // a waiter must not hide the failure from the caller
            }
          }
          throw failedError(failed, err);
        }
        position = e.position;
        if (state !== previous) place(known ?? slotFor(node), previous, state);
        if (listeners.size > 0) {
          const change: NodeChange = { node, position: e.position, state, previous, event: e };
          for (const l of listenerList()) {
            try {
              l(change);
            } catch {
              // a listener (one SSE client, one await) must never break the fold for everyone
            }
          }
        }
      }
    },
    failure: () => failed,
    onRolloutEvent(listener) {
      rolloutListeners.add(listener);
      return () => {
        rolloutListeners.delete(listener);
      };
    },
    onFailure(listener) {
      failureListeners.add(listener);
      return () => {
        failureListeners.delete(listener);
      };
    },
    onChange(listener, listenerOptions) {
      const bulk = listenerOptions?.bulk;
      // A listener that needs every change sees the model as of every event from now on.
      if (bulk === undefined && drafts !== null) endCatchUp();
      listeners.add(listener);
      listenerArray = null;
      if (bulk !== undefined) bulkListeners.set(listener, bulk);
      return () => {
        listeners.delete(listener);
        listenerArray = null;
        bulkListeners.delete(listener);
      };
    },
    catchUp,
    catchUpColumns,
    endCatchUp,
    restore(next, at) {
      drafts = null;
      draftPosition = null;
      bulkOver = true;
      slotOf = new Map();
      ids = [];
      states.length = 0;
      unbuilt = null;
      holes = 0;
      order = new Int32Array(0);
      tracker.clear();
      tally = createFleetTally();
      if (isDecoded(next)) {
        // Taken over, not copied: the snapshot's ids and slots are this model's from now on.
        slotOf = next.slots;
        ids = next.nodes;
        states.length = next.length;
        if (next.length > 0) {
          unbuilt = next;
          holes = next.length;
        }
        const now = clock();
        for (let slot = 0; slot < next.length; slot++) {
          tally.add(next.counted(slot));
          tracker.update(slot, ids[slot]!, next.status(slot), next.lastSeenMs(slot), now);
        }
        position = at;
        return;
      }
      for (const s of next) {
        const slot = slotFor(s.node);
        place(slot, states[slot], s);
      }
      position = at;
    },
    set(state) {
      if (drafts !== null) endCatchUp();
      const slot = slotFor(state.node);
      place(slot, slot < states.length ? stateAt(slot) : undefined, state);
    },
    page,
    fleet: (now, fleetOptions) => tally.summary(tracker.counts(now).byLiveness(), fleetOptions),
    liveness: (now) => tracker.counts(now),
  };
}
