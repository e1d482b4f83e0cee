import { makeNodeHeard, makeNodeSilent } from '../../core/events/index.ts';
import type { NodeHeard, NodeSilent, WithId } from '../../core/events/index.ts';

// Liveness recorded as transitions (docs/design.md §2–3). The watch keeps, per node, the exact
// last time it was heard (the wall clock, for the record) and when (a monotonic clock, for the
// timer: a wall clock stepped by NTP must not make a node silent or keep one alive). Hearing a
// node held silent or never seen makes a NodeHeard; the grace elapsing on the monotonic clock
// since the last hearing makes a NodeSilent. A node that stays alive makes nothing.

export type SeenRow = Readonly<{ node: string; seenAt: number; silent: boolean }>;

export type LivenessWatchOptions = Readonly<{
  graceMs: number;
  /** Wall clock, ms since the epoch: what the record says. */
  nowMs: () => number;
  /** Monotonic clock, ms: what the timer counts. */
  monoMs?: () => number;
  /** A node's grace elapsed: append this. */
  onSilent: (event: WithId<NodeSilent>) => void;
}>;

export type LivenessWatch = Readonly<{
  /** The node was heard at `at` (wall ms): the NodeHeard to append before its event, or null while it is held alive. */
  heard: (node: string, at: number) => WithId<NodeHeard> | null;
  /** Start from what was known when the engine last stopped (the last-seen table): alive rows get their remaining grace. */
  restore: (rows: Iterable<SeenRow>) => void;
  lastSeen: (node: string) => number | undefined;
  /** Every node's row. */
  rows: () => SeenRow[];
  /** The rows changed since the last call (heard or gone silent). */
  takeDirty: () => SeenRow[];
  /** Rows a failed flush did not write: changed again, for the next one. */
  restoreDirty: (rows: readonly SeenRow[]) => void;
  stop: () => void;
}>;

type Entry = { seenAt: number; mono: number; silent: boolean };

export function createLivenessWatch(options: LivenessWatchOptions): LivenessWatch {
  const { graceMs, nowMs, onSilent } = options;
  const monoMs = options.monoMs ?? (() => performance.now());
  const entries = new Map<string, Entry>();
  /** Nodes held alive, in the order they were last heard (delete + set moves one to the end): the oldest first. */
  const alive = new Map<string, Entry>();
  const dirty = new Set<string>();
  let timer: NodeJS.Timeout | null = null;
  let stopped = false;

  function schedule(): void {
    if (stopped || timer !== null) return;
    const first = alive.values().next();
    if (first.done === true) return;
    const wait = Math.max(0, first.value.mono + graceMs - monoMs());
    timer = setTimeout(expire, wait + 1);
    timer.unref?.();
  }

  function expire(): void {
    timer = null;
    const now = monoMs();
    for (const [node, e] of alive) {
      if (e.mono + graceMs > now) break;
      alive.delete(node);
      e.silent = true;
      dirty.add(node);
      onSilent(makeNodeSilent(node, e.seenAt, nowMs(), graceMs));
    }
    schedule();
  }

  return {
    heard(node, at) {
      const mono = monoMs();
      let e = entries.get(node);
      let event: WithId<NodeHeard> | null = null;
      if (e === undefined) {
        e = { seenAt: at, mono, silent: false };
        entries.set(node, e);
        event = makeNodeHeard(node, at, null);
      } else {
        if (e.silent) event = makeNodeHeard(node, at, e.seenAt);
        if (at > e.seenAt) e.seenAt = at;
        e.mono = mono;
        e.silent = false;
        alive.delete(node);
      }
      alive.set(node, e);
      dirty.add(node);
      schedule();
      return event;
    },
    restore(rows) {
      const mono = monoMs();
      const wall = nowMs();
      for (const r of rows) {
        // The time left of its grace, counted on this process's monotonic clock from now.
        const e: Entry = { seenAt: r.seenAt, mono: mono - Math.max(0, wall - r.seenAt), silent: r.silent };
        entries.set(r.node, e);
      }
      // Oldest first, so the timer walks them in order.
      const held = [...entries].filter(([, e]) => !e.silent).sort((a, b) => a[1].mono - b[1].mono);
      for (const [node, e] of held) alive.set(node, e);
      schedule();
    },
    lastSeen: (node) => entries.get(node)?.seenAt,
    rows: () => [...entries].map(([node, e]) => ({ node, seenAt: e.seenAt, silent: e.silent })),
    takeDirty() {
      const out: SeenRow[] = [];
      for (const node of dirty) {
        const e = entries.get(node)!;
        out.push({ node, seenAt: e.seenAt, silent: e.silent });
      }
      dirty.clear();
      return out;
    },
    restoreDirty(rows) {
      for (const r of rows) dirty.add(r.node);
    },
    stop() {
      stopped = true;
      if (timer !== null) clearTimeout(timer);
      timer = null;
    },
  };
}
