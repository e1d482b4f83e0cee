import { foldNode, initialNodeState } from '../../projections/index.ts';
import type { NodeState } from '../../projections/index.ts';
import { ConvergeError } from '../errors.ts';
import type { Recorded } from '../events/index.ts';
import { nodeOfStream } from '../events/index.ts';

// The in-memory read model (DESIGN §3, §6): a mutable Map<node, NodeState> where each entry is
// replaced by the pure fold, never edited in place. Listeners hear every change synchronously,
// in position order, so `await` and SSE react the moment an event is folded — no polling.

export type NodeChange = Readonly<{ node: string; position: bigint; state: NodeState; previous: NodeState | undefined; event: Recorded }>;
export type ChangeListener = (change: NodeChange) => void;

/** The event a fold threw on: the read model stopped before it (issue 13 item 2). */
export type FoldFailure = Readonly<{ position: bigint; id: string; type: Recorded['type']; node: string; message: string }>;

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
  /** Hear every change; returns the unsubscribe function. */
  onChange: (listener: ChangeListener) => () => void;
  /** Replace the whole model (snapshot restore). */
  restore: (states: Iterable<NodeState>, position: bigint | null) => void;
  /** Overwrite one node's state without an event: for restore and for tests that tamper on purpose. */
  set: (state: NodeState) => void;
}>;

const failedError = (f: FoldFailure, cause?: unknown): ConvergeError =>
  new ConvergeError(
    'CONVERGE_ERR_PROJECTION_FAILED',
    `the fold failed on ${f.type} ${f.id} (position ${f.position}, node ${JSON.stringify(f.node)}): ${f.message}; the read model stopped before it`,
    { details: { position: f.position.toString(), id: f.id, type: f.type, node: f.node }, ...(cause === undefined ? {} : { cause }) },
  );

export function createReadModel(): ReadModel {
  const states = new Map<string, NodeState>();
  const listeners = new Set<ChangeListener>();
  let position: bigint | null = null;
  let failed: FoldFailure | null = null;
  const failureListeners = new Set<(f: FoldFailure) => void>();

  return {
    get: (node) => states.get(node),
    has: (node) => states.has(node),
    nodes: () => states.values(),
    size: () => states.size,
    position: () => position,
    apply(events) {
      for (const e of events) {
        if (position !== null && e.position <= position) continue;
        if (failed !== null) throw failedError(failed);
        const node = nodeOfStream(e.stream) ?? e.data.node;
        const previous = states.get(node);
        let state: NodeState;
        try {
          state = foldNode(previous ?? initialNodeState(node), e);
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
    failure: () => failed,
    onFailure(listener) {
      failureListeners.add(listener);
      return () => {
        failureListeners.delete(listener);
      };
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
