import { makeNodeHeard, makeNodeSilent } from '../../core/events/index.ts';
import type { NodeHeard, NodeSilent } from '../../core/events/index.ts';
import type { NewEvent } from '../../store/port.ts';
import { createDueQueue } from './dueQueue.ts';

// Liveness recorded as transitions (docs/design.md §3 "Liveness as recorded"): what ingest
// decides per sign of life, and what the sweep decides as time passes. A node heard while this
// engine does not hold it heard makes a NodeHeard; a node held heard (or known from before this
// engine started) and not heard for the grace, on the monotonic clock, makes a NodeSilent with its
// exact last-seen time. Everything else — a node simply staying alive — makes nothing.
//
// An engine starts holding no node heard, so each node's first sign of life after a start is
// recorded: after a span no engine observed, the record says when the node was heard again.
//
// The nodes not silent wait in a queue by the monotonic time they were queued (dueQueue.ts); a
// node heard again is not moved then (ingest's hot path) but when it reaches the top, so a sweep
// looks at the nodes whose silence may be due, not at every node: at 100,000 nodes a scan of all
// of them was a long turn of its own each sweep.

type Entry = {
  /** Exact last time heard, ms since the epoch (a wall time: it goes into events). */
  seenMs: number;
  /** The same moment on the monotonic clock: silences are judged on it, never on the wall clock. */
  seenMono: number;
  /** heard: held heard since a NodeHeard; known: heard before this engine started, silence still to judge; silent: judged. */
  state: 'heard' | 'known' | 'silent';
  /** seenMs changed since the last flush of the last-seen lease. */
  dirty: boolean;
};

export type LivenessRecorder = Readonly<{
  /** A node heard at `atMs` (wall) / `mono`: the NodeHeard to record, or null while it is held heard. */
  heard: (node: string, atMs: number, mono: number) => NewEvent<NodeHeard> | null;
  /**
   * Nodes not heard for the grace as of `mono`: their NodeSilent events, observed at `wallMs`.
   * `sharedSeenMs`, when several engines share the store, is another engine's newer sighting
   * (the last-seen lease): a node it saw within the grace is not silent. `enough`, asked after
   * each node silenced (and every 256 nodes looked at), ends the call early: the nodes left are
   * answered by the next call.
   */
  silences: (
    mono: number,
    wallMs: number,
    sharedSeenMs?: (node: string) => number | undefined,
    enough?: () => boolean,
  ) => NewEvent<NodeSilent>[];
  /**
   * Whether some node's silence is due as of `mono` (to look up in the shared lease before
   * `silences`). `enough`, asked as it goes, ends it early with true: maybe, `silences` goes on.
   */
  due: (mono: number, enough?: () => boolean) => boolean;
  /** Seed with the last-seen times known at start (the lease, the fold): their silence is judged a grace after `mono`. */
  seed: (known: ReadonlyMap<string, number>, mono: number) => void;
  /**
   * Observation resumes at `mono` after a span no node could be heard in: as after a start, no node
   * is held heard (its next sign of life is a NodeHeard) and each not yet silent is judged a grace
   * after `mono`, with its last-seen time kept.
   */
  resume: (mono: number) => void;
  lastSeenMs: (node: string) => number | undefined;
  /** Every node's exact last-seen time (a copy). */
  all: () => Map<string, number>;
  /** The times changed since the last call, for the lease's flush: the first `limit` of them when given. */
  takeChanged: (limit?: number) => [string, number][];
  /** How many times changed since the last `takeChanged` (waiting for the flush). */
  changedCount: () => number;
  /** A flush that failed: its nodes go with the next one. */
  requeue: (rows: readonly (readonly [string, number])[]) => void;
}>;

export function createLivenessRecorder(options: Readonly<{ graceMs: number }>): LivenessRecorder {
  const { graceMs } = options;
  const nodes = new Map<string, Entry>();
  /** Every node not silent, once, at a time no later than its seenMono. */
  const queue = createDueQueue<Readonly<{ node: string; e: Entry }>>();
  let changed: string[] = [];

  /**
   * The first node whose silence is due as of `mono` (left on top), after moving the nodes heard
   * since they were queued to their time; 'cut' when `enough` said so first.
   */
  function firstDue(mono: number, enough: (() => boolean) | undefined): Readonly<{ node: string; e: Entry }> | undefined | 'cut' {
    for (let moved = 1; ; moved++) {
      const top = queue.peek();
      if (top === undefined || mono - top.at < graceMs) return undefined;
      if (top.item.e.seenMono <= top.at) return top.item;
      queue.retime(top.item.e.seenMono);
      if (moved % 256 === 0 && enough?.() === true) return 'cut';
    }
  }

  return {
    heard(node, atMs, mono) {
      const e = nodes.get(node);
      if (e === undefined) {
        const added: Entry = { seenMs: atMs, seenMono: mono, state: 'heard', dirty: true };
        nodes.set(node, added);
        queue.push(mono, { node, e: added });
        changed.push(node);
        return makeNodeHeard(node, atMs, null);
      }
      const before = e.seenMs;
      if (atMs > e.seenMs) e.seenMs = atMs;
      if (mono > e.seenMono) e.seenMono = mono;
      if (!e.dirty) {
        e.dirty = true;
        changed.push(node);
      }
      if (e.state === 'heard') return null;
      if (e.state === 'silent') queue.push(e.seenMono, { node, e });
      e.state = 'heard';
      return makeNodeHeard(node, atMs, before);
    },

    due(mono, enough) {
      return firstDue(mono, enough) !== undefined;
    },

    silences(mono, wallMs, sharedSeenMs, enough) {
      const out: NewEvent<NodeSilent>[] = [];
      for (let looked = 1; ; looked++) {
        const first = firstDue(mono, enough);
        if (first === undefined || first === 'cut') break;
        const { node, e } = first;
        const shared = sharedSeenMs?.(node);
        if (shared !== undefined && shared > e.seenMs) {
          // Another engine heard it since: take its time, judged a grace from it (on our clock, as
          // far as the two walls agree; the lease is only ever a few seconds behind).
          const ago = Math.max(0, wallMs - shared);
          e.seenMs = shared;
          e.seenMono = mono - ago;
          if (ago < graceMs) {
            queue.retime(e.seenMono);
            if (looked % 256 === 0 && enough?.() === true) break;
            continue;
          }
        }
        queue.pop();
        e.state = 'silent';
        out.push(makeNodeSilent(node, e.seenMs, wallMs, graceMs));
        if (enough?.() === true) break;
      }
      return out;
    },

    seed(known, mono) {
      for (const [node, ms] of known) {
        if (nodes.has(node) || !Number.isFinite(ms)) continue;
        const e: Entry = { seenMs: ms, seenMono: mono, state: 'known', dirty: false };
        nodes.set(node, e);
        queue.push(mono, { node, e });
      }
    },

    resume(mono) {
      // Each entry's queued time stays at or before its seenMono, as the queue needs: it only grows.
      for (const e of nodes.values()) {
        if (e.state === 'silent') continue;
        e.state = 'known';
        if (mono > e.seenMono) e.seenMono = mono;
      }
    },

    lastSeenMs: (node) => nodes.get(node)?.seenMs,
    all: () => new Map([...nodes].map(([node, e]) => [node, e.seenMs])),

    takeChanged(limit = Number.POSITIVE_INFINITY) {
      const taken = limit >= changed.length ? changed : changed.slice(0, limit);
      changed = taken === changed ? [] : changed.slice(taken.length);
      const out: [string, number][] = [];
      for (const node of taken) {
        const e = nodes.get(node)!;
        e.dirty = false;
        out.push([node, e.seenMs]);
      }
      return out;
    },

    changedCount: () => changed.length,

    requeue(rows) {
      for (const [node] of rows) {
        const e = nodes.get(node);
        if (e === undefined || e.dirty) continue;
        e.dirty = true;
        changed.push(node);
      }
    },
  };
}
