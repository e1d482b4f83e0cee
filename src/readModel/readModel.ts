import { createFleetTally, createNodeDraft, foldNode, initialNodeState, publishDraft } from '../../projections/index.ts';
import type { NodeDraft, NodeState } from '../../projections/index.ts';
import { ConvergeError } from '../core/errors.ts';
import type { DeclarationSent, Recorded } from '../core/events/index.ts';
import { isNodeEvent, isRolloutEvent, nodeOfStream, observationStream } from '../core/events/index.ts';
import { columnsOf, createNodeColumns, eventKind, streamNodeOf } from '../store/index.ts';
import type { NodeColumns } from '../store/index.ts';
import { foldEntry, internIds, internSpec } from './foldIntoDraftFast.ts';
import { createLivenessTracker } from './livenessTracker.ts';
import { pageOf, sortedSlots } from './nodePage.ts';
import type {
  ChangeListener,
  FoldFailure,
  NodeChange,
  NodePage,
  NodePageQuery,
  ReadModel,
  ReadModelOptions,
  RolloutEventListener,
} from './readModelTypes.ts';
import type { DecodedStates } from './snapshot/decodeStates.ts';
import { transitionOfCode } from './snapshot/transitions.ts';

// The in-memory read model (docs/design.md): a mutable Map<node, NodeState> where each entry is
// replaced by the pure fold, never edited in place. Listeners hear every change synchronously,
// in position order, so `await` and SSE react the moment an event is folded — no polling.

export type {
  ChangeListener,
  ChangeListenerOptions,
  FoldFailure,
  NodeChange,
  NodePage,
  NodePageQuery,
  ReadModel,
  ReadModelOptions,
  RolloutEventListener,
} from './readModelTypes.ts';

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
  let unobserved: string | null = null;
  const listeners = new Set<ChangeListener>();
  /** The listeners as an array, made again only after one is added or removed (not a copy per event). */
  let listenerArray: readonly ChangeListener[] | null = null;
  const listenerList = (): readonly ChangeListener[] => (listenerArray ??= [...listeners]);
  /** Listeners registered with a `bulk` callback, by listener. */
  const bulkListeners = new Map<ChangeListener, () => void>();
  /** A bulk catch-up's working states and position (null: none under way); `bulkOver`: no more bulk for this model. */
  let drafts: Map<string, NodeDraft> | null = null;
  let draftPosition: number | null = null;
  /** The bulk catch-up's latest transition per node (true: heard), for the tracker once the drafts are placed. */
  const draftMarks = new Map<string, boolean>();
  let bulkOver = false;
  const rolloutListeners = new Set<RolloutEventListener>();
  const observationListeners = new Set<() => void>();
  let position: bigint | null = null;
  let failed: FoldFailure | null = null;
  const failureListeners = new Set<(f: FoldFailure) => void>();

  /** Stop before the event `f` names, and say so to whoever waits. */
  function stopAt(f: FoldFailure): void {
    failed = f;
    for (const l of [...failureListeners]) {
      try {
        l(f);
      } catch {
        // a waiter must not hide the failure from the caller
      }
    }
  }

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
      previous.anomalies !== state.anomalies ||
      previous.retiredAt !== state.retiredAt
    ) {
      if (previous === undefined) tally.add(state);
      else tally.replace(previous, state);
    }
    if (
      previous === undefined ||
      previous.status !== state.status ||
      previous.lastSeenAt !== state.lastSeenAt ||
      previous.retiredAt !== state.retiredAt
    ) {
      tracker.update(slot, state.node, state.status, state.lastSeenAt, clock(), state.retiredAt !== null);
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

  /** Drop what the bulk fold folded: `apply` folds from zero again (it stops at a failing event). */
  function dropCatchUp(): false {
    drafts = null;
    draftMarks.clear();
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
      if (p <= last && c.kind[i] === eventKind.ignored) {
        draftPosition = p;
        continue;
      }
      // A rollout's event goes through `apply`, where the rollout view hears it among the node changes.
      if (p > last || c.kind[i] === eventKind.other) {
        bulkOver = true;
        return false;
      }
      const node = c.streamNode[i] ?? c.node[i]!;
      let d = ds.get(node);
      if (d === undefined) ds.set(node, (d = createNodeDraft(node)));
      const k = c.kind[i];
      if (k === eventKind.heard || k === eventKind.silent) draftMarks.set(node, k === eventKind.heard);
      try {
        foldEntry(d, c, i);
      } catch {
        // A half-folded draft is no state to serve: drop the catch-up; `apply` folds from zero
        // again, meets this event, and stops there as it does.
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
    const now = clock();
    for (const [node, heard] of draftMarks) tracker.transition(slotOf.get(node)!, heard, now);
    draftMarks.clear();
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

  const page = (query: NodePageQuery, now: number): NodePage =>
    pageOf(query, now, { ids, slots: (order = sortedSlots(order, ids)), tracker, stateAt });

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
        // A rollout's event: folded beside this model (rollouts.ts), never into a node.
        if (!isNodeEvent(e)) {
          position = e.position;
          // An observation span's event is read from its stream when asked (queries.ts); its listeners hear it was folded.
          if (!isRolloutEvent(e)) {
            if (e.stream === observationStream) for (const l of observationListeners) l();
            continue;
          }
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
          stopAt({ position: e.position, id: e.id, type: e.type, node, message: err instanceof Error ? err.message : String(err) });
          throw failedError(failed!, err);
        }
        position = e.position;
        if (state !== previous) place(known ?? slotFor(node), previous, state);
        if (e.type === 'NodeHeard' || e.type === 'NodeSilent') tracker.transition(slotOf.get(node)!, e.type === 'NodeHeard', clock());
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
    refuse(f) {
      if (failed === null) stopAt(f);
    },
    onRolloutEvent(listener) {
      rolloutListeners.add(listener);
      return () => {
        rolloutListeners.delete(listener);
      };
    },
    onObservation(listener) {
      observationListeners.add(listener);
      return () => observationListeners.delete(listener);
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
    restore(next, at, transitions = null) {
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
          const counted = next.counted(slot);
          tally.add(counted);
          tracker.update(slot, ids[slot]!, next.status(slot), next.lastSeenMs(slot), now, counted.retiredAt !== null);
          const t = transitionOfCode(transitions?.[slot]);
          if (t !== null) tracker.transition(slot, t === 'heard', now);
        }
        position = at;
        return;
      }
      let i = 0;
      for (const s of next) {
        const slot = slotFor(s.node);
        place(slot, states[slot], s);
        const t = transitionOfCode(transitions?.[i++]);
        if (t !== null) tracker.transition(slot, t === 'heard', clock());
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
    unobserved: () => unobserved,
    followRecord: (on) => tracker.followRecord(clock(), on),
    transitionOf: (node) => (slotOf.has(node) ? tracker.transitionOf(slotOf.get(node)!) : null),
    setUnobserved(reason) {
      unobserved = reason;
      tracker.setObserved(reason === null);
    },
  };
}
