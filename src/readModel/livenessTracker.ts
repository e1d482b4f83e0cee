import { defaultGraceMs, nodeStatuses } from '../../projections/index.ts';
import type { LivenessState, NodeStatus } from '../../projections/index.ts';
import { createIsoParser } from './isoTime.ts';

// Nodes counted by status × liveness, kept as events fold and as time passes, so /metrics and
// GET /v1/fleet answer in O(series) instead of judging every node's liveness per request (each
// /metrics scrape walked every node: 45 ms at 100,000 nodes, and scraping at 40 Hz took 15 % of
// a drain).
//
// Liveness is docs/design.md §3's, as the API reports it: connected ⇔ now − lastSeen ≤ grace, lastSeen
// being the newer of the folded time and the ingest's exact one (alive is coalesced in the store,
// docs/design.md §2). A connected node sits in a heap keyed by when it would go quiet (lastSeen + grace);
// counting at `now` first pops what has expired and asks the exact time of each before moving it
// to disconnected. A node becomes connected when a fold shows it seen within the grace. Since the
// ingest appends the first alive after any silence longer than its resolution, and resolution <
// grace (config), a node the ingest hears after going quiet is always folded as seen again; until
// that fold lands (milliseconds) it may still count as disconnected here.

export type ExactLastSeen = (node: string) => Date | string | null | undefined;

export type LivenessTrackerOptions = Readonly<{ graceMs?: number; exact?: ExactLastSeen }>;

export type LivenessCounts = Readonly<{
  get: (status: NodeStatus, liveness: LivenessState) => number;
  byLiveness: () => Record<LivenessState, number>;
}>;

export type LivenessTracker = Readonly<{
  /** A node's state changed (or appeared): its status and folded last-seen time (the text, or as Date.parse gives it: NaN for never). */
  update: (slot: number, node: string, status: NodeStatus, lastSeenAt: string | number | null, now: number, retired?: boolean) => void;
  /** Counts as of `now` (expirations up to `now` processed first). */
  counts: (now: number) => LivenessCounts;
  /** The node's liveness as of the last `counts` or `update` (call `counts(now)` first for `now`). */
  livenessOf: (slot: number) => LivenessState;
  /** The node's status as last updated. */
  statusOf: (slot: number) => NodeStatus;
  /** The node is retired: it is in no count (docs/design.md §3 "Retired nodes"). */
  retired: (slot: number) => boolean;
  /** How many nodes are retired. */
  retiredCount: () => number;
  /**
   * Whether the view observes liveness now. When it does not (an engine with no ingest, and the
   * record shows no engine observing: docs/design.md §3 "Not observed"), every node counts and reads
   * as not-observed; the judgement by grace goes on underneath for when observation comes back.
   */
  setObserved: (observed: boolean) => void;
  /** The node's latest recorded transition (docs/design.md §3 "Liveness as recorded"): NodeHeard or NodeSilent. */
  transition: (slot: number, heard: boolean, now: number) => void;
  /**
   * Judge a node with a recorded transition by it, as the record does (connected after NodeHeard,
   * disconnected after NodeSilent), not by grace: an engine without ingest, whose folded last-seen
   * times stay where the observing engine's last transition left them (liveObservation.ts), or an
   * engine with ingest while its broker link is lost. `on` false: by grace again, as ingest hears.
   */
  followRecord: (now: number, on?: boolean) => void;
  /** The slot's latest recorded transition, or null: none folded or restored. */
  transitionOf: (slot: number) => 'heard' | 'silent' | null;
  clear: () => void;
}>;

const statusCode: Readonly<Record<NodeStatus, number>> = Object.fromEntries(nodeStatuses.map((s, i) => [s, i])) as Record<
  NodeStatus,
  number
>;
const NEVER = 0;
const CONNECTED = 1;
const DISCONNECTED = 2;
/** Recorded transitions, per slot. */
const HEARD = 1;
const SILENT = 2;
// An engine with ingest observes now by definition: `not-observed` is then a state of the record (as
// of a moment no engine watched), counted here as zero so every label value is exported. An engine
// without ingest reads whether anyone observes now from the record (setObserved, liveObservation.ts).
const livenessNames: readonly LivenessState[] = ['never-seen', 'connected', 'disconnected', 'not-observed'];
const kinds = livenessNames.length;

const parseIso = createIsoParser();

const msOf = (t: Date | string | number | null | undefined): number =>
  t === null || t === undefined ? NaN : typeof t === 'string' ? parseIso(t) : typeof t === 'number' ? t : t.getTime();

export function createLivenessTracker(options: LivenessTrackerOptions = {}): LivenessTracker {
  const graceMs = options.graceMs ?? defaultGraceMs;
  const exact = options.exact;
  let capacity = 1024;
  let status = new Uint8Array(capacity);
  let live = new Uint8Array(capacity);
  let seen = new Float64Array(capacity);
  let queued = new Uint8Array(capacity);
  /** 1: retired, in no count; its status and liveness are still kept, for when a send brings it back. */
  let out = new Uint8Array(capacity);
  let mark = new Uint8Array(capacity);
  let byRecord = false;
  let retiredCount = 0;
  const names: string[] = [];
  const counts = new Int32Array(nodeStatuses.length * kinds);
  // Binary min-heap of (expiry, slot), one entry at most per slot.
  let heapAt = new Float64Array(capacity);
  let heapSlot = new Int32Array(capacity);
  let heapSize = 0;
  let lastNow = -Infinity;
  let observed = true;

  const grow = (slot: number): void => {
    if (slot < capacity) return;
    while (capacity <= slot) capacity *= 2;
    const g = <T extends Uint8Array | Float64Array | Int32Array>(a: T, make: (n: number) => T): T => {
      const b = make(capacity);
      b.set(a);
      return b;
    };
    status = g(status, (n) => new Uint8Array(n));
    live = g(live, (n) => new Uint8Array(n));
    seen = g(seen, (n) => new Float64Array(n));
    queued = g(queued, (n) => new Uint8Array(n));
    out = g(out, (n) => new Uint8Array(n));
    mark = g(mark, (n) => new Uint8Array(n));
    heapAt = g(heapAt, (n) => new Float64Array(n));
    heapSlot = g(heapSlot, (n) => new Int32Array(n));
  };

  const push = (at: number, slot: number): void => {
    let i = heapSize++;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (heapAt[parent]! <= at) break;
      heapAt[i] = heapAt[parent]!;
      heapSlot[i] = heapSlot[parent]!;
      i = parent;
    }
    heapAt[i] = at;
    heapSlot[i] = slot;
    queued[slot] = 1;
  };
  const pop = (): number => {
    const top = heapSlot[0]!;
    const at = heapAt[--heapSize]!;
    const slot = heapSlot[heapSize]!;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= heapSize) break;
      const c = l + 1 < heapSize && heapAt[l + 1]! < heapAt[l]! ? l + 1 : l;
      if (heapAt[c]! >= at) break;
      heapAt[i] = heapAt[c]!;
      heapSlot[i] = heapSlot[c]!;
      i = c;
    }
    heapAt[i] = at;
    heapSlot[i] = slot;
    queued[top] = 0;
    return top;
  };

  // Made once, not a closure per update: that closure (and the context holding its `slot`) was an
  // allocation per folded event.
  const cellOf = (slot: number): number => status[slot]! * kinds + live[slot]!;

  /** Newest sign of life of a slot: folded, or the ingest's exact time if newer. */
  const effective = (slot: number): number => {
    const folded = seen[slot]!;
    if (exact === undefined) return folded;
    const e = msOf(exact(names[slot]!));
    return Number.isNaN(folded) || e > folded ? e : folded;
  };

  const setLive = (slot: number, next: number): void => {
    if (out[slot] === 1) {
      live[slot] = next;
      return;
    }
    const base = status[slot]! * kinds;
    counts[base + live[slot]!]!--;
    live[slot] = next;
    counts[base + next]!++;
  };

  /** Judge a slot at `now` and queue it if connected. */
  const judge = (slot: number, now: number): number => {
    if (byRecord && mark[slot] !== 0) return mark[slot] === HEARD ? CONNECTED : DISCONNECTED;
    // Connected by its folded time and already queued: the ingest's time, never older, changes
    // neither (the queued expiry is checked again when it comes). Spares a lookup per fold.
    const folded = seen[slot]!;
    if (queued[slot] === 1 && now - folded <= graceMs) return CONNECTED;
    const at = effective(slot);
    if (Number.isNaN(at)) return NEVER;
    if (now - at > graceMs) return DISCONNECTED;
    if (queued[slot] === 0) push(at + graceMs, slot);
    return CONNECTED;
  };

  /** Move every node whose time has passed to disconnected (or re-queue it if seen meanwhile). */
  const advance = (now: number): void => {
    if (now < lastNow) {
      // The clock went back (a test's injected clock): judge everyone again.
      heapSize = 0;
      queued.fill(0);
      for (let slot = 0; slot < names.length; slot++) setLive(slot, judge(slot, now));
    }
    lastNow = now;
    while (heapSize > 0 && heapAt[0]! < now) {
      const slot = pop();
      setLive(slot, judge(slot, now));
    }
  };

  return {
    update(slot, node, st, lastSeenAt, now, retired = false) {
      if (slot >= names.length) {
        grow(slot);
        names[slot] = node;
        status[slot] = statusCode[st];
        live[slot] = NEVER;
        seen[slot] = NaN;
        out[slot] = 0;
        mark[slot] = 0;
        counts[statusCode[st] * kinds + NEVER]!++;
      }
      const code = statusCode[st];
      if (retired !== (out[slot] === 1)) {
        // Leaves every count, or comes back into its cell.
        counts[cellOf(slot)]! += retired ? -1 : 1;
        out[slot] = retired ? 1 : 0;
        retiredCount += retired ? 1 : -1;
      }
      if (status[slot] !== code) {
        if (out[slot] === 0) counts[cellOf(slot)]!--;
        status[slot] = code;
        if (out[slot] === 0) counts[cellOf(slot)]!++;
      }
      seen[slot] = msOf(lastSeenAt);
      if (now > lastNow) lastNow = now;
      setLive(slot, judge(slot, now));
    },
    counts(now) {
      advance(now);
      // Unobserved, a status's nodes all count as not-observed, whatever the grace would say.
      const cell = (s: number, l: number): number => {
        if (observed) return counts[s * kinds + l]!;
        if (livenessNames[l] !== 'not-observed') return 0;
        let all = 0;
        for (let k = 0; k < kinds; k++) all += counts[s * kinds + k]!;
        return all;
      };
      return {
        get: (st, liveness) => cell(statusCode[st], livenessNames.indexOf(liveness)),
        byLiveness: () => {
          const out: Record<LivenessState, number> = { connected: 0, disconnected: 0, 'never-seen': 0, 'not-observed': 0 };
          for (let s = 0; s < nodeStatuses.length; s++) for (let l = 0; l < kinds; l++) out[livenessNames[l]!] += cell(s, l);
          return out;
        },
      };
    },
    livenessOf: (slot) => (observed ? livenessNames[live[slot]!]! : 'not-observed'),
    statusOf: (slot) => nodeStatuses[status[slot]!]!,
    retired: (slot) => out[slot] === 1,
    retiredCount: () => retiredCount,
    setObserved(next) {
      observed = next;
    },
    transition(slot, heard, now) {
      if (slot >= names.length) return;
      mark[slot] = heard ? HEARD : SILENT;
      if (byRecord) setLive(slot, judge(slot, Math.max(now, lastNow)));
    },
    followRecord(now, on = true) {
      if (byRecord === on) return;
      byRecord = on;
      // Back to grace: every connected node is queued again by its expiry as it is judged.
      heapSize = 0;
      queued.fill(0);
      for (let slot = 0; slot < names.length; slot++) setLive(slot, judge(slot, Math.max(now, lastNow)));
    },
    transitionOf: (slot) => (mark[slot] === HEARD ? 'heard' : mark[slot] === SILENT ? 'silent' : null),
    clear() {
      names.length = 0;
      retiredCount = 0;
      counts.fill(0);
      heapSize = 0;
      queued.fill(0);
      lastNow = -Infinity;
    },
  };
}
