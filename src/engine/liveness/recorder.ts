import { makeNodeHeard, makeNodeSilent } from '../../core/events/index.ts';
import type { NodeHeard, NodeSilent } from '../../core/events/index.ts';
import type { NewEvent } from '../../store/port.ts';

// Liveness recorded as transitions (docs/design.md §3 "Liveness as recorded"): what ingest
// decides per sign of life, and what the sweep decides as time passes. A node heard while this
// engine does not hold it heard makes a NodeHeard; a node held heard (or known from before this
// engine started) and not heard for the grace, on the monotonic clock, makes a NodeSilent with its
// exact last-seen time. Everything else — a node simply staying alive — makes nothing.
//
// An engine starts holding no node heard, so each node's first sign of life after a start is
// recorded: after a span no engine observed, the record says when the node was heard again.

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
   * each node silenced, ends the call early: the nodes left are answered by the next call.
   */
  silences: (
    mono: number,
    wallMs: number,
    sharedSeenMs?: (node: string) => number | undefined,
    enough?: () => boolean,
  ) => NewEvent<NodeSilent>[];
  /** Nodes whose silence is due as of `mono` (to look up in the shared lease before `silences`). */
  dueCount: (mono: number) => number;
  /** Seed with the last-seen times known at start (the lease, the fold): their silence is judged a grace after `mono`. */
  seed: (known: ReadonlyMap<string, number>, mono: number) => void;
  lastSeenMs: (node: string) => number | undefined;
  /** Every node's exact last-seen time (a copy). */
  all: () => Map<string, number>;
  /** The times changed since the last call, for the lease's flush. */
  takeChanged: () => [string, number][];
  /** A flush that failed: its nodes go with the next one. */
  requeue: (rows: readonly (readonly [string, number])[]) => void;
}>;

export function createLivenessRecorder(options: Readonly<{ graceMs: number }>): LivenessRecorder {
  const { graceMs } = options;
  const nodes = new Map<string, Entry>();
  let changed: string[] = [];

  return {
    heard(node, atMs, mono) {
      const e = nodes.get(node);
      if (e === undefined) {
        nodes.set(node, { seenMs: atMs, seenMono: mono, state: 'heard', dirty: true });
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
      e.state = 'heard';
      return makeNodeHeard(node, atMs, before);
    },

    dueCount(mono) {
      let n = 0;
      for (const e of nodes.values()) if (e.state !== 'silent' && mono - e.seenMono >= graceMs) n++;
      return n;
    },

    silences(mono, wallMs, sharedSeenMs, enough) {
      const out: NewEvent<NodeSilent>[] = [];
      for (const [node, e] of nodes) {
        if (e.state === 'silent' || mono - e.seenMono < graceMs) continue;
        const shared = sharedSeenMs?.(node);
        if (shared !== undefined && shared > e.seenMs) {
          // Another engine heard it since: take its time, judged a grace from it (on our clock, as
          // far as the two walls agree; the lease is only ever a few seconds behind).
          const ago = Math.max(0, wallMs - shared);
          e.seenMs = shared;
          e.seenMono = mono - ago;
          if (ago < graceMs) continue;
        }
        e.state = 'silent';
        out.push(makeNodeSilent(node, e.seenMs, wallMs, graceMs));
        if (enough?.() === true) break;
      }
      return out;
    },

    seed(known, mono) {
      for (const [node, ms] of known) {
        if (nodes.has(node) || !Number.isFinite(ms)) continue;
        nodes.set(node, { seenMs: ms, seenMono: mono, state: 'known', dirty: false });
      }
    },

    lastSeenMs: (node) => nodes.get(node)?.seenMs,
    all: () => new Map([...nodes].map(([node, e]) => [node, e.seenMs])),

    takeChanged() {
      const out: [string, number][] = [];
      for (const node of changed) {
        const e = nodes.get(node)!;
        e.dirty = false;
        out.push([node, e.seenMs]);
      }
      changed = [];
      return out;
    },

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
