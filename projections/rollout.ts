import type {
  Recorded,
  RolloutEvent,
  RolloutFailure,
  RolloutSelection,
  RolloutStartedData,
  WaveCompletedData,
  RolloutHaltedData,
  RolloutAbortedData,
  RolloutCompletedData,
  OnSuperseded,
} from '../src/core/events/index.ts';
import { makeRolloutEvent } from '../src/core/events/index.ts';
import type { WithId } from '../src/core/events/index.ts';
import type { NodeState } from './nodeState.ts';

// Issue 14: a rollout, folded from its own stream (`rollout-<id>`). Pure and deterministic like
// the node fold: the live engine, `converge rollout status` and a replay call the same function,
// and every fact that depended on a clock (a timeout, a failure seen) is in an event, so the
// fold needs none. How each node is doing is not in this stream: it is the node fold's answer
// (nodeState.ts) compared with the digest this rollout sent that node — `nodeOutcome` below.

export const rolloutStatuses = ['running', 'paused', 'halted', 'completed', 'aborted'] as const;
export type RolloutStatus = (typeof rolloutStatuses)[number];
export const isTerminal = (s: RolloutStatus): boolean => s === 'halted' || s === 'completed' || s === 'aborted';

export type WaveState = Readonly<{
  wave: number;
  /** Its nodes are the rollout's targets[from, to). */
  from: number;
  to: number;
  startedAt: string | null;
  /** When its last send was recorded (ms): its timeout runs from there. */
  lastSentAtMs: number | null;
  /** Time the rollout spent paused since the wave's last send: the timeout waits that much longer. */
  pausedMs: number;
  completed: WaveCompletedData | null;
}>;

export type RolloutSend = Readonly<{ wave: number; serial: number; digest: string; sentAt: string }>;
export type RolloutSkip = Readonly<{ wave: number; code: string; reason: string }>;

export type RolloutState = Readonly<{
  id: string;
  started: RolloutStartedData;
  /** The selected nodes in wave order, as listed after RolloutStarted. */
  targets: readonly string[];
  status: RolloutStatus;
  waves: readonly WaveState[];
  /** The highest wave opened (0: none yet). */
  current: number;
  /** What this rollout sent each node, from RolloutSent. */
  sends: ReadonlyMap<string, RolloutSend>;
  /** Nodes it could not send to (a carried port), from RolloutSent. */
  skipped: ReadonlyMap<string, RolloutSkip>;
  /** Totals over the completed waves. */
  done: number;
  failed: number;
  superseded: number;
  pausedAt: string | null;
  halted: RolloutHaltedData | null;
  completed: RolloutCompletedData | null;
  aborted: RolloutAbortedData | null;
  /** Time of the last event folded. */
  updatedAt: string;
  /** Revision of the last event folded in the rollout's stream: the expected revision of the next decision. */
  revision: bigint;
  position: bigint;
}>;

// A rollout's collections grow by appending (targets, sends) or change one entry per event
// (waves), so a fold that copied them per event was quadratic in the plan. The states of one line
// of folds share them instead, and each state records how far it reaches: the latest state reads
// the collections as they are, an earlier one rebuilds its own view once from the undo log.
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
      pausedAt: null,
      halted: null,
      completed: null,
      aborted: null,
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
        updatedAt: d.completedAt,
      };
      break;
    }
    case 'RolloutPaused':
      if (isTerminal(s.status)) break;
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
export const targetsComplete = (s: RolloutState): boolean => s.targets.length >= s.started.targets;

/** When an open wave times out (ms), or null while it still has nodes to send to. */
export const waveDeadline = (s: RolloutState, w: WaveState): number | null =>
  w.lastSentAtMs === null ? null : w.lastSentAtMs + s.started.waveTimeoutMs + w.pausedMs;

// ---------------------------------------------------------------------------------------------
// The rule (issue 14 §3): how one node stands in this rollout, from the node fold alone.

export const nodeOutcomes = ['unsent', 'pending', 'done', 'refused', 'degraded', 'superseded', 'unsendable'] as const;
export type NodeOutcome = (typeof nodeOutcomes)[number];

export const isFailure = (o: NodeOutcome): boolean => o === 'refused' || o === 'degraded' || o === 'unsendable';

/**
 * A node is done when its latest report names the digest of the declaration this rollout sent
 * it and it is converged — the node fold's caughtUp, which is an equality of digests: a report
 * about an earlier declaration (stale), however late it arrives, leaves it pending. A node whose
 * latest send is newer than ours was superseded from elsewhere: not done, and not a failure.
 */
export function nodeOutcome(
  send: RolloutSend | undefined,
  skip: RolloutSkip | undefined,
  node: Pick<NodeState, 'sent' | 'status'> | undefined,
): NodeOutcome {
  if (skip !== undefined) return 'unsendable';
  if (send === undefined) return 'unsent';
  // The read model has not folded our send yet (it is folded with the RolloutSent that names it).
  if (node === undefined || node.sent === null) return 'pending';
  // Serials grow by one per send to a node (DESIGN §1): a later serial is a newer send. (By serial,
  // not by looking the digest up in the node's send history, which keeps only the last 8 sends.)
  if (node.sent.digest !== send.digest) return node.sent.serial > send.serial ? 'superseded' : 'pending';
  switch (node.status) {
    case 'converged':
      return 'done';
    case 'refused':
      return 'refused';
    case 'degraded':
      return 'degraded';
    default:
      return 'pending';
  }
}

/** What a failure list says about a node, for people (and for the events that record it). */
export function failureDetail(
  outcome: NodeOutcome,
  node: Pick<NodeState, 'reported' | 'missing'> | undefined,
  skip: RolloutSkip | undefined,
): string {
  const r = node?.reported ?? null;
  switch (outcome) {
    case 'unsendable':
      return skip === undefined ? 'not sent' : `${skip.code}: ${skip.reason}`;
    case 'refused':
      return r === null ? 'refused' : `refused: ${r.refused}`;
    case 'degraded': {
      const failed = r === null ? [] : Object.entries(r.failed).map(([id, why]) => `${id} (${why})`);
      const missing = node?.missing ?? [];
      return [failed.length > 0 ? `failed ${failed.join(', ')}` : '', missing.length > 0 ? `missing ${missing.join(', ')}` : '']
        .filter((x) => x !== '')
        .join('; ');
    }
    default:
      if (r === null) return 'no report since the send';
      return `behind: the latest report names ${r.declared === null ? 'no digest' : r.declared.slice(0, 12)} (${r.class})`;
  }
}

// ---------------------------------------------------------------------------------------------
// The driver's decision (issue 14 §2): a pure function of the folded rollout, how the open wave's
// nodes stand, and the time. The driver (src/engine/rolloutDriver.ts) carries it out, records
// it, and asks again once the record is folded.

/** How the open wave's nodes stand now: kept by the read side (src/readModel/rollouts.ts). */
export type WaveProgress = Readonly<{
  wave: number;
  /** Nodes of the wave not sent to yet, in wave order (at most `limit` of them). */
  unsent: readonly string[];
  unsentCount: number;
  pending: number;
  done: number;
  superseded: number;
  /** Refused, degraded or unsendable now, with details. */
  failures: readonly RolloutFailure[];
  failureCount: number;
  /** The pending nodes with details, listed when the timeout turns them into failures (at most `limit`). */
  pendingFailures: () => readonly RolloutFailure[];
  supersededNodes: () => readonly string[];
}>;

export type Decision =
  | Readonly<{ kind: 'wait'; untilMs: number | null; why: string }>
  | Readonly<{ kind: 'startWave'; wave: number; from: number; to: number }>
  | Readonly<{ kind: 'send'; wave: number; nodes: readonly string[] }>
  | Readonly<{ kind: 'completeWave'; data: Omit<WaveCompletedData, 'rollout' | 'completedAt'> }>
  | Readonly<{ kind: 'halt'; data: Omit<RolloutHaltedData, 'rollout' | 'at'> }>
  | Readonly<{ kind: 'complete'; data: Omit<RolloutCompletedData, 'rollout' | 'at'> }>;

const cap = <T>(xs: readonly T[], n: number): T[] => (xs.length > n ? xs.slice(0, n) : [...xs]);

/** A rollout's superseded policy: recorded in its plan, 'fail' when the plan predates the choice. */
export const supersededPolicy = (s: Pick<RolloutState, 'started'>): OnSuperseded => s.started.onSuperseded ?? 'fail';

/** Failures spent of the budget over the completed waves: superseded nodes too under 'fail'. */
export const budgetUsed = (s: Pick<RolloutState, 'started' | 'failed' | 'superseded'>): number =>
  s.failed + (supersededPolicy(s) === 'fail' ? s.superseded : 0);

export function decide(s: RolloutState, progress: WaveProgress | null, nowMs: number, listLimit = 1_000): Decision {
  if (isTerminal(s.status)) return { kind: 'wait', untilMs: null, why: s.status };
  if (s.status === 'paused') return { kind: 'wait', untilMs: null, why: 'paused' };
  if (!targetsComplete(s)) return { kind: 'wait', untilMs: null, why: 'targets still being listed' };
  const { maxFailures } = s.started;

  if (s.current === 0) {
    const first = s.waves[0];
    if (first === undefined) return { kind: 'wait', untilMs: null, why: 'no wave planned' };
    return { kind: 'startWave', wave: 1, from: first.from, to: first.to };
  }
  const w = s.waves[s.current - 1];
  if (w === undefined) return { kind: 'wait', untilMs: null, why: 'unknown wave' };

  if (w.completed !== null) {
    const next = s.waves[s.current];
    if (next === undefined) return { kind: 'complete', data: { done: s.done, failed: s.failed, superseded: s.superseded } };
    const opensAt = Date.parse(w.completed.completedAt) + s.started.pauseMs;
    if (nowMs < opensAt) return { kind: 'wait', untilMs: opensAt, why: `pause before wave ${next.wave}` };
    return { kind: 'startWave', wave: next.wave, from: next.from, to: next.to };
  }

  if (progress === null || progress.wave !== w.wave) return { kind: 'wait', untilMs: null, why: 'progress not known yet' };
  // A superseded node is not done: under 'fail' it spends the budget like any failure, under
  // 'hold' it keeps the wave open. Either way it never counts towards the wave's completion.
  const supersededFail = supersededPolicy(s) === 'fail';
  const supersededFailures = (): RolloutFailure[] =>
    supersededFail
      ? progress
          .supersededNodes()
          .map((node) => ({ node, reason: 'superseded' as const, detail: 'sent a newer declaration from elsewhere' }))
      : [];
  const seen = (): RolloutFailure[] => cap([...progress.failures, ...supersededFailures()], listLimit);
  // The budget first: a failure seen halts the rollout before anything more is sent.
  const failures = budgetUsed(s) + progress.failureCount + (supersededFail ? progress.superseded : 0);
  if (failures > maxFailures) {
    return { kind: 'halt', data: { wave: w.wave, failures, maxFailures, failed: seen(), why: 'overBudget' } };
  }
  if (progress.unsentCount > 0) return { kind: 'send', wave: w.wave, nodes: progress.unsent };
  const held: Decision | null =
    !supersededFail && progress.superseded > 0
      ? {
          kind: 'wait',
          untilMs: null,
          why: `${progress.superseded} superseded node(s) hold wave ${w.wave}: abort the rollout, or send them its spec again`,
        }
      : null;
  const settle = (extra: readonly RolloutFailure[], extraCount: number): Decision => {
    if (held !== null) return held;
    // A wave completes only on proof: with no node done, nothing shows the spec works anywhere,
    // and the next wave must not open to more nodes on failures the budget happened to allow.
    if (progress.done === 0) {
      return {
        kind: 'halt',
        data: {
          wave: w.wave,
          failures: failures + extraCount,
          maxFailures,
          failed: cap([...seen(), ...extra], listLimit),
          why: 'noneDone',
        },
      };
    }
    return {
      kind: 'completeWave',
      data: {
        wave: w.wave,
        done: progress.done,
        failed: progress.failureCount + extraCount,
        superseded: progress.superseded,
        failures: cap([...progress.failures, ...extra], listLimit),
        supersededNodes: cap(progress.supersededNodes(), listLimit),
      },
    };
  };
  if (progress.pending === 0) return settle([], 0);
  const deadline = waveDeadline(s, w);
  if (deadline === null || nowMs < deadline) {
    return { kind: 'wait', untilMs: deadline, why: `${progress.pending} node(s) of wave ${w.wave} still behind` };
  }
  // Past the timeout every node still behind counts against the budget.
  const late = progress.pendingFailures();
  if (failures + progress.pending > maxFailures) {
    return {
      kind: 'halt',
      data: {
        wave: w.wave,
        failures: failures + progress.pending,
        maxFailures,
        failed: cap([...seen(), ...late], listLimit),
        why: 'overBudget',
      },
    };
  }
  return settle(late, progress.pending);
}

/**
 * How a wave's nodes stand, computed from scratch over its nodes: the reference the read side's
 * incremental tracker (src/readModel/rollouts.ts) is tested against, and what the CLI uses.
 */
export function waveProgress(
  s: RolloutState,
  wave: number,
  nodeOf: (node: string) => NodeState | undefined,
  limit = 1_000,
): WaveProgress | null {
  const w = s.waves[wave - 1];
  if (w === undefined || w.startedAt === null) return null;
  const unsent: string[] = [];
  const failures: RolloutFailure[] = [];
  const pendingNodes: string[] = [];
  const superseded: string[] = [];
  let unsentCount = 0;
  let failureCount = 0;
  let done = 0;
  for (let i = w.from; i < w.to; i++) {
    const node = s.targets[i];
    if (node === undefined) continue;
    const state = nodeOf(node);
    const skip = s.skipped.get(node);
    const o = nodeOutcome(s.sends.get(node), skip, state);
    if (o === 'unsent') {
      unsentCount++;
      if (unsent.length < limit) unsent.push(node);
    } else if (o === 'pending') pendingNodes.push(node);
    else if (o === 'done') done++;
    else if (o === 'superseded') superseded.push(node);
    else {
      failureCount++;
      if (failures.length < limit) failures.push({ node, reason: o as RolloutFailure['reason'], detail: failureDetail(o, state, skip) });
    }
  }
  return {
    wave,
    unsent,
    unsentCount,
    pending: pendingNodes.length,
    done,
    superseded: superseded.length,
    failures,
    failureCount,
    pendingFailures: () =>
      pendingNodes
        .slice(0, limit)
        .map((node) => ({ node, reason: 'timeout' as const, detail: failureDetail('pending', nodeOf(node), undefined) })),
    supersededNodes: () => superseded.slice(0, limit),
  };
}

/**
 * The rollout event that records a decision (all but `send`, which the driver records with the
 * declarations themselves), with its deterministic id and the time it was taken.
 */
export function eventOfDecision(
  s: RolloutState,
  d: Exclude<Decision, { kind: 'wait' } | { kind: 'send' }>,
  nowIso: string,
): WithId<RolloutEvent> {
  const rollout = s.id;
  switch (d.kind) {
    case 'startWave':
      return makeRolloutEvent('WaveStarted', { rollout, wave: d.wave, from: d.from, to: d.to, startedAt: nowIso });
    case 'completeWave':
      return makeRolloutEvent('WaveCompleted', { rollout, completedAt: nowIso, ...d.data });
    case 'halt':
      return makeRolloutEvent('RolloutHalted', { rollout, at: nowIso, ...d.data });
    case 'complete':
      return makeRolloutEvent('RolloutCompleted', { rollout, at: nowIso, ...d.data });
  }
}

// ---------------------------------------------------------------------------------------------
// Planning (issue 14 §4): which nodes, in which waves, with which budget.

export type WavePlan = Readonly<{ asGiven: string; cumulative: readonly number[] }>;

/**
 * `1,10%,50%,100%`: each step is how many of the targets have been reached by the end of that
 * wave, as a count or a percentage (rounded up, so 10% of 5 nodes is 1). Steps that add no node
 * are dropped, and the last wave always reaches every target.
 */
export function planWaves(text: string, targets: number): WavePlan | string {
  const steps = text.split(',').map((x) => x.trim());
  if (steps.length === 0 || steps.some((x) => x === ''))
    return `waves must be counts or percentages separated by commas, like 1,10%,50%,100%`;
  const cumulative: number[] = [];
  for (const step of steps) {
    const m = /^(\d+(?:\.\d+)?)(%?)$/.exec(step);
    if (m === null) return `wave ${JSON.stringify(step)} is not a count or a percentage (like 5 or 10%)`;
    const v = Number(m[1]);
    const n = m[2] === '%' ? Math.ceil((Math.min(v, 100) / 100) * targets) : Math.floor(v);
    if (m[2] === '%' && v > 100) return `wave ${JSON.stringify(step)} is over 100%`;
    const upTo = Math.min(n, targets);
    if (upTo > (cumulative.at(-1) ?? 0)) cumulative.push(upTo);
  }
  if ((cumulative.at(-1) ?? 0) < targets) cumulative.push(targets);
  return { asGiven: text, cumulative };
}

/** `3` or `5%` (of the targets, rounded down): failures beyond it halt the rollout. */
export function planBudget(text: string, targets: number): number | string {
  const m = /^(\d+(?:\.\d+)?)(%?)$/.exec(text.trim());
  if (m === null) return `max failures ${JSON.stringify(text)} is not a count or a percentage (like 0, 3 or 5%)`;
  const v = Number(m[1]);
  if (m[2] === '%') return v > 100 ? `max failures ${JSON.stringify(text)} is over 100%` : Math.floor((v / 100) * targets);
  return Math.floor(v);
}

/** What an operator asks for; RolloutStarted records it without the explicit list (the targets list it). */
export type TargetSelection = Exclude<RolloutSelection, { kind: 'nodes' }> | Readonly<{ kind: 'nodes'; nodes: readonly string[] }>;

/**
 * The targets, in wave order: an explicit list keeps the operator's order (the first nodes named
 * are the canaries); every other selection is taken from the node states and sorted by id, so the
 * same fleet gives the same waves.
 */
export function selectTargets(selection: TargetSelection, states: Iterable<Pick<NodeState, 'node' | 'sent'>>): string[] {
  if (selection.kind === 'nodes') {
    const seen = new Set<string>();
    return selection.nodes.filter((n) => !seen.has(n) && (seen.add(n), true));
  }
  const out: string[] = [];
  for (const s of states) {
    if (
      selection.kind === 'all' ||
      (selection.kind === 'spec' && s.sent?.specDigest === selection.specDigest) ||
      (selection.kind === 'prefix' && s.node.startsWith(selection.prefix))
    )
      out.push(s.node);
  }
  return out.sort();
}
