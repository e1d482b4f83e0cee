import type { FailureReason, Recorded, RolloutEvent, WaveCompletedData } from '../src/core/events/index.ts';
import { isTerminal } from '../src/core/rollout/index.ts';
import type { RolloutSend, RolloutSkip, RolloutState, WaveState } from '../src/core/rollout/index.ts';
import { foldRollback } from './rollback.ts';

// A rollout, folded from its own stream (`rollout-<id>`). Pure and deterministic like
// the node fold: the live engine, `converge rollout status` and a replay call the same function,
// and every fact that depended on a clock (a timeout, a failure seen) is in an event, so the
// fold needs none. How each node is doing is not in this stream: it is the node fold's answer
// (nodeState.ts) compared with the digest this rollout sent that node: `nodeOutcome` in src/core/rollout/outcome.ts.

type Undo =
  | { version: number; kind: 'wave'; index: number; was: WaveState }
  | { version: number; kind: 'send'; node: string; was: RolloutSend }
  | { version: number; kind: 'skip'; node: string; was: RolloutSkip };

type Lineage = {
  /** The version of the latest state of this line: the only one that may grow the collections. */
  head: number;
  targets: string[];
  waves: WaveState[];
  sends: Map<string, RolloutSend>;
  skipped: Map<string, RolloutSkip>;
  /** What each version overwrote in place (a wave, a node sent to again). */
  undo: Undo[];
};

type Reach = {
  lineage: Lineage;
  version: number;
  targets: number;
  sends: number;
  skipped: number;
  /** An earlier state's own views, each rebuilt once when first read. */
  views: Partial<Views>;
};

type Views = {
  targets: readonly string[];
  waves: readonly WaveState[];
  sends: ReadonlyMap<string, RolloutSend>;
  skipped: ReadonlyMap<string, RolloutSkip>;
};

const reachOf = new WeakMap<RolloutState, Reach>();

type Scalars = Omit<RolloutState, keyof Views>;

function firstOf<V>(m: ReadonlyMap<string, V>, n: number): Map<string, V> {
  const out = new Map<string, V>();
  if (n === 0) return out;
  for (const [k, v] of m) {
    out.set(k, v);
    if (out.size === n) break;
  }
  return out;
}

/** The undo entries written after this state, newest first. */
function* undoneSince(r: Reach): Generator<Undo> {
  const undo = r.lineage.undo;
  for (let i = undo.length - 1; i >= 0 && undo[i]!.version > r.version; i--) yield undo[i]!;
}

const rebuild: { [K in keyof Views]: (r: Reach) => Views[K] } = {
  targets: (r) => r.lineage.targets.slice(0, r.targets),
  waves: (r) => {
    const waves = [...r.lineage.waves];
    for (const u of undoneSince(r)) if (u.kind === 'wave') waves[u.index] = u.was;
    return waves;
  },
  sends: (r) => {
    const sends = firstOf(r.lineage.sends, r.sends);
    for (const u of undoneSince(r)) if (u.kind === 'send' && sends.has(u.node)) sends.set(u.node, u.was);
    return sends;
  },
  skipped: (r) => {
    const skipped = firstOf(r.lineage.skipped, r.skipped);
    for (const u of undoneSince(r)) if (u.kind === 'skip' && skipped.has(u.node)) skipped.set(u.node, u.was);
    return skipped;
  },
};

function viewOf<K extends keyof Views>(r: Reach, key: K): Views[K] {
  const l = r.lineage;
  if (l.head === r.version) return l[key] as Views[K];
  return (r.views[key] ??= rebuild[key](r));
}

function stateOf(scalars: Scalars, reach: Reach): RolloutState {
  const s = { ...scalars } as RolloutState;
  Object.defineProperties(s, {
    targets: { enumerable: true, get: () => viewOf(reach, 'targets') },
    waves: { enumerable: true, get: () => viewOf(reach, 'waves') },
    sends: { enumerable: true, get: () => viewOf(reach, 'sends') },
    skipped: { enumerable: true, get: () => viewOf(reach, 'skipped') },
  });
  reachOf.set(s, reach);
  return s;
}

const scalarsOf = (s: RolloutState): Scalars => {
  const { targets: _t, waves: _w, sends: _s, skipped: _k, ...rest } = s;
  return rest;
};

/**
 * The collections a fold of `s` may grow in place: its own line's when `s` is the latest state
 * of it, else a new line of its own (folding an earlier state again branches, at a copy's cost).
 */
function lineageFor(s: RolloutState): { lineage: Lineage; reach: Reach } {
  const r = reachOf.get(s);
  if (r !== undefined && r.lineage.head === r.version) return { lineage: r.lineage, reach: r };
  const lineage: Lineage = {
    head: 0,
    targets: [...s.targets],
    waves: [...s.waves],
    sends: new Map(s.sends),
    skipped: new Map(s.skipped),
    undo: [],
  };
  return {
    lineage,
    reach: { lineage, version: 0, targets: lineage.targets.length, sends: lineage.sends.size, skipped: lineage.skipped.size, views: {} },
  };
}

/** The per-class totals after a completed wave; one recorded without classes adds to `unclassified`. */
function classTotals(s: RolloutState, d: WaveCompletedData): Pick<RolloutState, 'failedByClass' | 'unclassified'> {
  const failedByClass: Partial<Record<FailureReason, number>> = { ...s.failedByClass };
  if (d.superseded > 0) failedByClass.superseded = (failedByClass.superseded ?? 0) + d.superseded;
  if (d.byClass === undefined) return { failedByClass, unclassified: s.unclassified + d.failed };
  for (const [k, v] of Object.entries(d.byClass) as [FailureReason, number][]) {
    if (k !== 'superseded') failedByClass[k] = (failedByClass[k] ?? 0) + v;
  }
  return { failedByClass, unclassified: s.unclassified };
}

/** The first event of a rollout's stream makes its state; null for any other event first. */
export function startRollout(e: Recorded<RolloutEvent>): RolloutState | null {
  if (e.type !== 'RolloutStarted') return null;
  const d = e.data;
  const waves: WaveState[] = d.waves.map((to, i) => ({
    wave: i + 1,
    from: i === 0 ? 0 : (d.waves[i - 1] ?? 0),
    to,
    startedAt: null,
    lastSentAtMs: null,
    pausedMs: 0,
    completed: null,
  }));
  const lineage: Lineage = { head: 0, targets: [], waves, sends: new Map(), skipped: new Map(), undo: [] };
  return stateOf(
    {
      id: d.rollout,
      started: d,
      status: 'running',
      current: 0,
      done: 0,
      failed: 0,
      superseded: 0,
      failedByClass: {},
      unclassified: 0,
      pausedAt: null,
      halted: null,
      completed: null,
      aborted: null,
      rollback: null,
      gate: null,
      updatedAt: d.startedAt,
      revision: e.revision,
      position: e.position,
    },
    { lineage, version: 0, targets: 0, sends: 0, skipped: 0, views: {} },
  );
}

/**
 * (state, event) → state. Never throws on a well-typed event; never changes what `s` shows: the
 * new state grows collections `s` shares, but `s` keeps reading them as they were.
 */
export function foldRollout(s: RolloutState, e: Recorded<RolloutEvent>): RolloutState {
  const { lineage: l, reach: was } = lineageFor(s);
  const version = l.head + 1;
  const changeWave = (wave: number, change: (w: WaveState) => WaveState): void => {
    const index = wave - 1;
    const w = l.waves[index];
    if (w === undefined) return;
    l.undo.push({ version, kind: 'wave', index, was: w });
    l.waves[index] = change(w);
  };
  const at = { revision: e.revision > s.revision ? e.revision : s.revision, position: e.position > s.position ? e.position : s.position };
  let next: Scalars = { ...scalarsOf(s), ...at };
  switch (e.type) {
    case 'RolloutStarted':
      break;
    case 'RolloutNodesListed': {
      const d = e.data;
      // Lists arrive in order; a list that does not continue the targets is a repeat, and changes nothing.
      if (d.from !== was.targets) break;
      for (const n of d.nodes) l.targets.push(n);
      next = { ...next, updatedAt: d.listedAt };
      break;
    }
    case 'WaveStarted': {
      const d = e.data;
      changeWave(d.wave, (w) => ({ ...w, from: d.from, to: d.to, startedAt: d.startedAt }));
      next = { ...next, current: Math.max(s.current, d.wave), updatedAt: d.startedAt };
      break;
    }
    case 'RolloutSent': {
      const d = e.data;
      for (const x of d.sends) {
        const before = l.sends.get(x.node);
        if (before !== undefined) l.undo.push({ version, kind: 'send', node: x.node, was: before });
        l.sends.set(x.node, { wave: d.wave, serial: x.serial, digest: x.digest, sentAt: d.sentAt });
      }
      for (const x of d.skipped) {
        const before = l.skipped.get(x.node);
        if (before !== undefined) l.undo.push({ version, kind: 'skip', node: x.node, was: before });
        l.skipped.set(x.node, { wave: d.wave, code: x.code, reason: x.reason });
      }
      const sentAtMs = Date.parse(d.sentAt);
      changeWave(d.wave, (w) => ({ ...w, lastSentAtMs: sentAtMs, pausedMs: 0 }));
      next = { ...next, updatedAt: d.sentAt };
      break;
    }
    case 'WaveCompleted': {
      const d = e.data;
      changeWave(d.wave, (w) => ({ ...w, completed: d }));
      next = {
        ...next,
        done: s.done + d.done,
        failed: s.failed + d.failed,
        superseded: s.superseded + d.superseded,
        ...classTotals(s, d),
        updatedAt: d.completedAt,
      };
      break;
    }
    case 'RolloutPaused':
      if (isTerminal(s.status) || s.rollback !== null) break;
      next = { ...next, status: 'paused', pausedAt: e.data.at, updatedAt: e.data.at };
      break;
    case 'RolloutResumed': {
      if (s.status !== 'paused' || s.pausedAt === null) break;
      const pausedFor = Math.max(0, Date.parse(e.data.at) - Date.parse(s.pausedAt));
      // The open wave's timeout does not run while the rollout is paused.
      const open = l.waves[s.current - 1];
      if (open !== undefined && open.completed === null && open.lastSentAtMs !== null)
        changeWave(s.current, (w) => ({ ...w, pausedMs: w.pausedMs + pausedFor }));
      next = { ...next, status: 'running', pausedAt: null, updatedAt: e.data.at };
      break;
    }
    case 'RolloutHalted':
      next = { ...next, status: 'halted', halted: e.data, pausedAt: null, updatedAt: e.data.at };
      break;
    case 'RolloutCompleted':
      next = { ...next, status: 'completed', completed: e.data, pausedAt: null, updatedAt: e.data.at };
      break;
    case 'RolloutAborted':
      next = { ...next, status: 'aborted', aborted: e.data, pausedAt: null, updatedAt: e.data.at };
      break;
    case 'WaveGateChecked': {
      const d = e.data;
      const attempts = s.gate?.wave === d.wave ? s.gate.attempts + 1 : 1;
      next = { ...next, gate: { wave: d.wave, passed: d.passed, status: d.status, detail: d.detail, attempts, at: d.at }, updatedAt: d.at };
      break;
    }
    default:
      next = { ...next, ...foldRollback(s, e) };
      break;
  }
  l.head = version;
  return stateOf(next, { lineage: l, version, targets: l.targets.length, sends: l.sends.size, skipped: l.skipped.size, views: {} });
}

/** A rollout's stream folded from its first event; null for an empty stream or one that does not start with RolloutStarted. */
export function foldRolloutEvents(events: Iterable<Recorded<RolloutEvent>>): RolloutState | null {
  let s: RolloutState | null = null;
  for (const e of events) s = s === null ? startRollout(e) : foldRollout(s, e);
  return s;
}

/** Every target listed (RolloutNodesListed may take several events for a large fleet). */
