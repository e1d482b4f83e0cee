import { createLatencyHistogram, foldRollout, startRollout } from '../../projections/index.ts';
import {
  budgetUsed,
  defaultSilentGraceMs,
  failureDetail,
  isFailure,
  isTerminal,
  lateOf,
  nodeOutcome,
  supersededPolicy,
  waveDeadline,
} from '../core/rollout/index.ts';
import type { LatencyHistogram, NodeState } from '../../projections/index.ts';
import type { NodeOutcome, RolloutSend, RolloutSkip, RolloutState, RolloutStatus, WaveProgress } from '../core/rollout/index.ts';
import type { OnSuperseded, Recorded, RolloutEvent, RolloutFailure } from '../core/events/index.ts';
import { rolloutEventTypes, rolloutOfStream, rolloutStreamPrefix } from '../core/events/index.ts';
import type { EventStore } from '../store/index.ts';
import type { ReadModel } from './readModel.ts';
import { criteriaNow } from './rolloutCriteria.ts';
import type { CriterionNow } from './rolloutCriteria.ts';

// The live view of every rollout: each `rollout-<id>` stream folded with
// projections/rollout.ts, and how each of its nodes stands — the node fold's answer compared with
// the digest the rollout sent it (nodeOutcome) — counted per wave as the read model folds.
//
// It hangs off the read model's listeners, so it sees rollout events and node changes in store
// order. A node change costs one Map lookup when the node is in no rollout; for a node a rollout
// sent to, one nodeOutcome per rollout that sent it. Lists (which nodes are pending, which failed)
// are built only when asked, from the wave's targets.

/** Per wave: how its nodes stand now. `failed` = refused + degraded + unsendable; a timeout is judged by the deadline. */
export type WaveCounts = Readonly<{
  wave: number;
  from: number;
  to: number;
  size: number;
  startedAt: string | null;
  completedAt: string | null;
  /** What WaveCompleted recorded when the wave completed (its timeouts among the failures); null while open. */
  recorded: Readonly<{ done: number; failed: number; superseded: number }> | null;
  /** When the wave's timeout turns its pending nodes into failures (null: not all sent yet, or completed). */
  deadline: string | null;
  unsent: number;
  pending: number;
  done: number;
  refused: number;
  degraded: number;
  unsendable: number;
  failed: number;
  superseded: number;
}>;

export type RolloutSummary = Readonly<{
  rollout: string;
  status: RolloutStatus;
  specDigest: string;
  selection: RolloutState['started']['selection'];
  targets: number;
  asGiven: RolloutState['started']['asGiven'];
  maxFailures: number;
  /** The abort criteria (a single budget is one over every class) and how each stands now. */
  criteria: readonly CriterionNow[];
  waveTimeoutMs: number;
  pauseMs: number;
  onSuperseded: OnSuperseded;
  startedBy: string;
  startedAt: string;
  updatedAt: string;
  /** The highest wave opened (0: none yet). */
  current: number;
  waves: readonly WaveCounts[];
  /** Over every wave, now. */
  totals: Readonly<{ unsent: number; pending: number; done: number; failed: number; superseded: number }>;
  /** Failures counted against the budget: those the completed waves recorded, and the open wave's now. */
  budget: Readonly<{ used: number; max: number }>;
  /** Send → matching report over the nodes this rollout completed (nearest rank, as the fleet's). */
  convergence: Readonly<{ samples: number; p50Ms: number | null; p99Ms: number | null }>;
  /**
   * A running rollout's estimated time to reach every target: the nodes not yet settled at the rate
   * nodes have settled since the first send, plus the pauses still to come. Null before any node
   * settled and once the rollout ended.
   */
  eta: Readonly<{ remaining: number; ms: number | null; at: string | null }>;
  pausedAt: string | null;
  halted: (NonNullable<RolloutState['halted']> & Readonly<{ why: 'overBudget' | 'noneDone' }>) | null;
  completed: RolloutState['completed'];
  aborted: RolloutState['aborted'];
  /** Store position of the last change: a rollout event, or a change of one of its nodes' outcomes. */
  position: string;
}>;

/** One target as it stands in the rollout. */
export type RolloutNode = Readonly<{
  node: string;
  wave: number;
  outcome: NodeOutcome;
  /** What this rollout sent it (null: not sent, or unsendable). */
  serial: number | null;
  digest: string | null;
  sentAt: string | null;
  /** Why it is not done, in words (null when done). */
  detail: string | null;
}>;

export type RolloutNodesQuery = Readonly<{ wave?: number; outcome?: NodeOutcome; limit: number; after?: number }>;
export type RolloutNodesPage = Readonly<{ rollout: string; nodes: readonly RolloutNode[]; total: number; next: number | null }>;

export type RolloutChange = Readonly<{ rollout: string; position: bigint }>;
export type RolloutChangeListener = (change: RolloutChange) => void;

export type RolloutView = Readonly<{
  get: (id: string) => RolloutState | undefined;
  /** Every rollout, newest start first. */
  list: () => readonly RolloutState[];
  summary: (id: string, now: number) => RolloutSummary | undefined;
  /** Targets with their outcomes, in wave order; `after` is the index in the targets to start after. */
  nodes: (id: string, query: RolloutNodesQuery) => RolloutNodesPage | undefined;
  /**
   * How the open wave's nodes stand, for the driver's decision: counts kept as events fold, lists
   * built from the wave's targets when first read. Equal to projections' waveProgress.
   */
  progress: (id: string, limit?: number) => WaveProgress | null;
  /** `progress` of `s`'s rollout when this view has folded its stream to `s.revision`, as the driver did; else undefined. */
  progressAt: (s: RolloutState, limit?: number) => WaveProgress | null | undefined;
  onChange: (listener: RolloutChangeListener) => () => void;
  /** Fold the rollout streams up to `upTo` (after a snapshot restore: the read model skipped them). */
  load: (store: EventStore, upTo: bigint | null) => Promise<void>;
  /** Rollouts tracked, and nodes sent to by one (for tests and the bench). */
  size: () => Readonly<{ rollouts: number; sends: number }>;
  stop: () => void;
}>;

/** A node this rollout sent to (or could not), with its outcome as last counted. */
type Entry = {
  readonly r: Tracked;
  readonly wave: number;
  readonly send: RolloutSend | undefined;
  readonly skip: RolloutSkip | undefined;
  outcome: NodeOutcome;
  /** Its latency is in the histogram (counted once, when it was first done). */
  measured: boolean;
  /** The node's report count when last looked at: a new report changes why a pending node is not done. */
  reports: number;
};

type Counts = { pending: number; done: number; refused: number; degraded: number; unsendable: number; superseded: number };
const zero = (): Counts => ({ pending: 0, done: 0, refused: 0, degraded: 0, unsendable: 0, superseded: 0 });

type Tracked = {
  state: RolloutState;
  /** Index by wave number − 1. */
  counts: Counts[];
  latencies: LatencyHistogram;
  firstSentMs: number | null;
  position: bigint;
};

/** A time as ISO 8601, or null past the Date range (a plan stored before plans were bounded). */
const isoOrNull = (ms: number | null): string | null => (ms === null || !(Math.abs(ms) <= 8.64e15) ? null : new Date(ms).toISOString());

const countable = (o: NodeOutcome): o is keyof Counts => o !== 'unsent';

/** `graceMs`: the liveness grace a node still behind at its wave's timeout is judged silent by. */
export function createRolloutView(readModel: ReadModel, options: Readonly<{ graceMs?: number }> = {}): RolloutView {
  const graceMs = options.graceMs ?? defaultSilentGraceMs;
  const rollouts = new Map<string, Tracked>();
  /** node → the rollouts that sent to it (one entry almost always). */
  const byNode = new Map<string, Entry | Entry[]>();
  const listeners = new Set<RolloutChangeListener>();
  let sends = 0;

  /** The node's entry in this rollout: from the one index by node (a Map per rollout cost ~8 MiB per 100,000 targets). */
  const entryOf = (r: Tracked, node: string): Entry | undefined => {
    const at = byNode.get(node);
    if (at === undefined) return undefined;
    if (!Array.isArray(at)) return at.r === r ? at : undefined;
    return at.find((e) => e.r === r);
  };

  const emit = (r: Tracked, position: bigint): void => {
    if (position > r.position) r.position = position;
    for (const l of [...listeners]) {
      try {
        l({ rollout: r.state.id, position });
      } catch {
        // one listener (an SSE client) must not stop the others
      }
    }
  };

  function recount(entry: Entry, state: NodeState | undefined): boolean {
    const next = entry.skip !== undefined ? 'unsendable' : nodeOutcome(entry.send, undefined, state);
    const c = entry.r.counts[entry.wave - 1];
    if (next === entry.outcome || c === undefined) return false;
    if (countable(entry.outcome)) c[entry.outcome]--;
    if (countable(next)) c[next]++;
    entry.outcome = next;
    if (next === 'done' && !entry.measured && state?.sent?.acknowledgedAt != null) {
      entry.measured = true;
      entry.r.latencies.add(Date.parse(state.sent.acknowledgedAt) - Date.parse(state.sent.sentAt));
    }
    return true;
  }

  /** Whether the rollout shows something new for this node: its outcome moved, or a report (a stale one) says why it is still pending. */
  function changed(entry: Entry, state: NodeState | undefined): boolean {
    const reports = state?.reports ?? 0;
    const reported = reports !== entry.reports;
    entry.reports = reports;
    return recount(entry, state) || (reported && entry.outcome === 'pending');
  }

  function track(r: Tracked, node: string, wave: number, send: RolloutSend | undefined, skip: RolloutSkip | undefined): void {
    // A node is sent to once per rollout (its send's id is named by both); a repeat changes nothing.
    if (entryOf(r, node) !== undefined) return;
    sends++;
    const entry: Entry = { r, wave, send, skip, outcome: 'unsent', measured: false, reports: 0 };
    const at = byNode.get(node);
    if (at === undefined) byNode.set(node, entry);
    else if (Array.isArray(at)) at.push(entry);
    else byNode.set(node, [at, entry]);
    changed(entry, readModel.get(node));
  }

  function apply(e: Recorded<RolloutEvent>): void {
    const id = rolloutOfStream(e.stream) ?? e.data.rollout;
    let r = rollouts.get(id);
    if (r === undefined) {
      const state = startRollout(e);
      if (state === null) return;
      r = {
        state,
        counts: state.waves.map(zero),
        latencies: createLatencyHistogram(),
        firstSentMs: null,
        position: e.position,
      };
      rollouts.set(id, r);
      emit(r, e.position);
      return;
    }
    if (e.position <= r.state.position) return;
    r.state = foldRollout(r.state, e);
    if (e.type === 'RolloutSent') {
      const d = e.data;
      if (r.firstSentMs === null) r.firstSentMs = Date.parse(d.sentAt);
      for (const x of d.sends) track(r, x.node, d.wave, r.state.sends.get(x.node), undefined);
      for (const x of d.skipped) track(r, x.node, d.wave, undefined, r.state.skipped.get(x.node));
    }
    emit(r, e.position);
  }

  const unsubscribeRollouts = readModel.onRolloutEvent(apply);
  const unsubscribeNodes = readModel.onChange(
    (c) => {
      const at = byNode.get(c.node);
      if (at === undefined) return;
      if (!Array.isArray(at)) {
        if (changed(at, c.state)) emit(at.r, c.position);
        return;
      }
      for (const entry of at) if (changed(entry, c.state)) emit(entry.r, c.position);
    },
    {
      // A bulk catch-up starts from an empty model and ends before the first rollout event
      // (ReadModel.catchUp): no node it folds is in a rollout this view tracks yet.
      bulk: () => {},
    },
  );

  function waveCounts(r: Tracked): WaveCounts[] {
    return r.state.waves.map((w, i) => {
      const c = r.counts[i] ?? zero();
      const size = w.to - w.from;
      const failed = c.refused + c.degraded + c.unsendable;
      const settled = c.pending + c.done + failed + c.superseded;
      // A wave left open by a halt or an abort never times out: it has no deadline to show.
      const deadline = w.completed === null && !isTerminal(r.state.status) ? waveDeadline(r.state, w) : null;
      return {
        wave: w.wave,
        from: w.from,
        to: w.to,
        size,
        startedAt: w.startedAt,
        completedAt: w.completed?.completedAt ?? null,
        recorded: w.completed === null ? null : { done: w.completed.done, failed: w.completed.failed, superseded: w.completed.superseded },
        deadline: isoOrNull(deadline),
        unsent: Math.max(0, size - settled),
        pending: c.pending,
        done: c.done,
        refused: c.refused,
        degraded: c.degraded,
        unsendable: c.unsendable,
        failed,
        superseded: c.superseded,
      };
    });
  }

  function summary(id: string, now: number): RolloutSummary | undefined {
    const r = rollouts.get(id);
    if (r === undefined) return undefined;
    const s = r.state;
    const waves = waveCounts(r);
    const totals = { unsent: 0, pending: 0, done: 0, failed: 0, superseded: 0 };
    for (const w of waves) {
      totals.unsent += w.unsent;
      totals.pending += w.pending;
      totals.done += w.done;
      totals.failed += w.failed;
      totals.superseded += w.superseded;
    }
    const open = s.current > 0 ? s.waves[s.current - 1] : undefined;
    const openWave = open !== undefined && open.completed === null ? waves[open.wave - 1] : undefined;
    const openFailed = openWave === undefined ? 0 : openWave.failed + (supersededPolicy(s) === 'fail' ? openWave.superseded : 0);
    const settled = totals.done + totals.failed + totals.superseded;
    const remaining = s.started.targets - settled;
    let etaMs: number | null = null;
    if (!isTerminal(s.status) && r.firstSentMs !== null && settled > 0 && now > r.firstSentMs) {
      const perNode = (now - r.firstSentMs) / settled;
      const pausesLeft = s.waves.filter((w) => w.startedAt === null).length * s.started.pauseMs;
      etaMs = Math.round(remaining * perNode + pausesLeft);
    } else if (isTerminal(s.status)) etaMs = null;
    return {
      rollout: s.id,
      status: s.status,
      specDigest: s.started.specDigest,
      selection: s.started.selection,
      targets: s.started.targets,
      asGiven: s.started.asGiven,
      maxFailures: s.started.maxFailures,
      criteria: criteriaNow(s, openWave),
      waveTimeoutMs: s.started.waveTimeoutMs,
      pauseMs: s.started.pauseMs,
      onSuperseded: supersededPolicy(s),
      startedBy: s.started.startedBy,
      startedAt: s.started.startedAt,
      updatedAt: s.updatedAt,
      current: s.current,
      waves,
      totals,
      // A halt records what it counted (the timeouts among them): the budget shows that, not a recount.
      budget: { used: s.halted?.failures ?? budgetUsed(s) + openFailed, max: s.started.maxFailures },
      convergence: { samples: r.latencies.count(), p50Ms: r.latencies.percentile(50), p99Ms: r.latencies.percentile(99) },
      eta: {
        remaining: isTerminal(s.status) ? 0 : remaining,
        ms: etaMs,
        at: etaMs === null ? null : isoOrNull(now + etaMs),
      },
      pausedAt: s.pausedAt,
      halted: s.halted === null ? null : { ...s.halted, why: s.halted.why ?? 'overBudget' },
      completed: s.completed,
      aborted: s.aborted,
      position: r.position.toString(),
    };
  }

  function describe(r: Tracked, index: number, wave: number): RolloutNode | null {
    const node = r.state.targets[index];
    if (node === undefined) return null;
    const entry = entryOf(r, node);
    const state = readModel.get(node);
    const outcome = entry?.outcome ?? 'unsent';
    const send = entry?.send;
    return {
      node,
      wave,
      outcome,
      serial: send?.serial ?? null,
      digest: send?.digest ?? null,
      sentAt: send?.sentAt ?? null,
      detail: outcome === 'done' ? null : outcome === 'unsent' ? 'not sent yet' : failureDetail(outcome, state, entry?.skip),
    };
  }

  function nodes(id: string, q: RolloutNodesQuery): RolloutNodesPage | undefined {
    const r = rollouts.get(id);
    if (r === undefined) return undefined;
    const out: RolloutNode[] = [];
    let total = 0;
    let more = false;
    let lastIndex = -1;
    for (const w of r.state.waves) {
      if (q.wave !== undefined && w.wave !== q.wave) continue;
      for (let i = w.from; i < w.to && i < r.state.targets.length; i++) {
        const outcome = entryOf(r, r.state.targets[i]!)?.outcome ?? 'unsent';
        if (q.outcome !== undefined && outcome !== q.outcome) continue;
        total++;
        if (q.after !== undefined && i <= q.after) continue;
        if (out.length < q.limit) {
          const d = describe(r, i, w.wave);
          if (d !== null) out.push(d);
          lastIndex = i;
        } else more = true;
      }
    }
    return { rollout: id, nodes: out, total, next: more && lastIndex >= 0 ? lastIndex : null };
  }

  function progress(id: string, limit = 1_000): WaveProgress | null {
    const r = rollouts.get(id);
    if (r === undefined) return null;
    const s = r.state;
    const w = s.waves[s.current - 1];
    if (w === undefined || w.startedAt === null) return null;
    const c = r.counts[w.wave - 1] ?? zero();
    const size = w.to - w.from;
    const failureCount = c.refused + c.degraded + c.unsendable;
    const unsentCount = Math.max(0, size - (c.pending + c.done + failureCount + c.superseded));
    const collect = <T>(want: (o: NodeOutcome) => boolean, make: (node: string, entry: Entry | undefined) => T, max = limit): T[] => {
      const out: T[] = [];
      for (let i = w.from; i < w.to && out.length < max; i++) {
        const node = s.targets[i];
        if (node === undefined) continue;
        const entry = entryOf(r, node);
        if (want(entry?.outcome ?? 'unsent')) out.push(make(node, entry));
      }
      return out;
    };
    let unsent: readonly string[] | null = null;
    let failures: readonly RolloutFailure[] | null = null;
    return {
      wave: w.wave,
      get unsent() {
        unsent ??=
          unsentCount === 0
            ? []
            : collect(
                (o) => o === 'unsent',
                (n) => n,
              );
        return unsent;
      },
      unsentCount,
      pending: c.pending,
      done: c.done,
      superseded: c.superseded,
      get failures() {
        failures ??=
          failureCount === 0
            ? []
            : collect(isFailure, (node, entry) => ({
                node,
                reason: entry!.outcome as RolloutFailure['reason'],
                detail: failureDetail(entry!.outcome, readModel.get(node), entry!.skip),
              }));
        return failures;
      },
      failureCount,
      failuresByClass: { refused: c.refused, degraded: c.degraded, unsendable: c.unsendable },
      // Every pending node is classified (by liveness, which moves with the clock), so the walk is
      // over the whole wave; it is taken once, when the wave times out.
      late: (nowMs) =>
        lateOf(
          collect(
            (o) => o === 'pending',
            (n) => n,
            Number.POSITIVE_INFINITY,
          ),
          (n) => readModel.get(n),
          nowMs,
          graceMs,
          limit,
        ),
      supersededNodes: () =>
        collect(
          (o) => o === 'superseded',
          (n) => n,
        ),
    };
  }

  function progressAt(s: RolloutState, limit?: number): WaveProgress | null | undefined {
    return rollouts.get(s.id)?.state.revision === s.revision ? progress(s.id, limit) : undefined;
  }

  async function load(store: EventStore, upTo: bigint | null): Promise<void> {
    if (upTo === null) return;
    for await (const batch of store.readAll({ streamPrefix: rolloutStreamPrefix })) {
      for (const e of batch) {
        if (e.position > upTo) return;
        if ((rolloutEventTypes as readonly string[]).includes(e.type)) apply(e as Recorded<RolloutEvent>);
      }
    }
  }

  return {
    get: (id) => rollouts.get(id)?.state,
    list: () =>
      [...rollouts.values()]
        .map((r) => r.state)
        .sort((a, b) =>
          a.started.startedAt === b.started.startedAt ? (a.id < b.id ? -1 : 1) : a.started.startedAt < b.started.startedAt ? 1 : -1,
        ),
    summary,
    nodes,
    progress,
    progressAt,
    onChange(listener) {
      listeners.add(listener);
      return () => {
        listeners.delete(listener);
      };
    },
    load,
    size: () => ({ rollouts: rollouts.size, sends }),
    stop() {
      unsubscribeRollouts();
      unsubscribeNodes();
      listeners.clear();
    },
  };
}
