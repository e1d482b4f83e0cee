import { createLatencyHistogram, foldRollout, startRollout } from '../../projections/index.ts';
import { defaultSilentGraceMs, nodeOutcome } from '../core/rollout/index.ts';
import type { NodeState } from '../../projections/index.ts';
import type { RolloutSend, RolloutSkip, RolloutState, WaveProgress } from '../core/rollout/index.ts';
import type { Recorded, RolloutEvent } from '../core/events/index.ts';
import { isRollbackSendOf, rolloutEventTypes, rolloutOfStream, rolloutStreamPrefix } from '../core/events/index.ts';
import type { EventStore } from '../store/index.ts';
import type { ReadModel } from './readModel.ts';
import { nodesPage } from './rolloutNodes.ts';
import { progressOf } from './rolloutProgress.ts';
import { withExactLastSeen } from './queries.ts';
import { summaryOf } from './rolloutSummary.ts';
import { countable, zero } from './rolloutViewTypes.ts';
import type { Entry, Lookup, ProgressFolded, RolloutChangeListener, RolloutNodeState, RolloutView, Tracked } from './rolloutViewTypes.ts';

export type {
  WaveCounts,
  RolloutSummary,
  TimeoutHeld,
  RolloutNode,
  RolloutNodesQuery,
  RolloutNodesPage,
  RolloutChange,
  RolloutChangeListener,
  RolloutView,
  ProgressFolded,
} from './rolloutViewTypes.ts';

// The live view of every rollout: each `rollout-<id>` stream folded with
// projections/rollout.ts, and how each of its nodes stands — the node fold's answer compared with
// the digest the rollout sent it (nodeOutcome) — counted per wave as the read model folds.
//
// It hangs off the read model's listeners, so it sees rollout events and node changes in store
// order. A node change costs one Map lookup when the node is in no rollout; for a node a rollout
// sent to, one nodeOutcome per rollout that sent it. Lists (which nodes are pending, which failed)
// are built only when asked, from the wave's targets.
// The queries over it are in rolloutSummary.ts, rolloutNodes.ts and rolloutProgress.ts.

/**
 * `graceMs`: the liveness grace a node still behind at its wave's timeout is judged silent by;
 * `lastSeen`: the ingest's exact last-seen time, which that judgement reads as the node's own
 * liveness does (alive is not stored while a node stays heard, docs/design.md §3).
 */
export function createRolloutView(
  readModel: ReadModel,
  options: Readonly<{ graceMs?: number; lastSeen?: (node: string) => Date | null }> = {},
): RolloutView {
  const graceMs = options.graceMs ?? defaultSilentGraceMs;
  const exact = options.lastSeen;
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

  function recount(entry: Entry, state: NodeState | undefined, event?: Recorded): boolean {
    // Once its rollback was sent, the node's wave outcome stays as it was then (the rollback's
    // newer send would read as superseded); how it stands on the rollback is the summary's. The
    // rollback's declaration folds just before the RollbackSent that lists it (one append).
    if (entry.r.state.rollback?.sends.has(state?.node ?? '') === true || isRollbackSendOf(event, entry.r.state.id)) return true;
    const next = nodeOutcome(entry.send, entry.skip, state);
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
  function changed(entry: Entry, state: NodeState | undefined, event?: Recorded): boolean {
    const reports = state?.reports ?? 0;
    const reported = reports !== entry.reports;
    entry.reports = reports;
    return recount(entry, state, event) || (reported && entry.outcome === 'pending');
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
        if (changed(at, c.state, c.event)) emit(at.r, c.position);
        return;
      }
      for (const entry of at) if (changed(entry, c.state, c.event)) emit(entry.r, c.position);
    },
    {
      // A bulk catch-up starts from an empty model and ends before the first rollout event
      // (ReadModel.catchUp): no node it folds is in a rollout this view tracks yet.
      bulk: () => {},
    },
  );

  const nodeOf = (node: string): RolloutNodeState | undefined => {
    const state = readModel.get(node);
    if (state === undefined) return undefined;
    const seen = exact?.(node) ?? null;
    if (seen !== null) return withExactLastSeen(state, seen);
    // No exact time (no ingest, or not heard since it started): the record says, while an engine
    // observes; the folded time says nothing of now for a node that stays alive (docs/design.md §3).
    const last = readModel.unobserved() === null ? readModel.transitionOf(node) : null;
    return last === null ? state : { ...state, connected: last === 'heard' };
  };
  const lookup: Lookup = { entryOf, nodeOf };

  function summary(id: string, now: number) {
    const r = rollouts.get(id);
    return r === undefined ? undefined : summaryOf(r, now, lookup);
  }

  function nodes(id: string, q: Parameters<RolloutView['nodes']>[1]) {
    const r = rollouts.get(id);
    return r === undefined ? undefined : nodesPage(r, q, lookup);
  }

  function progress(id: string, limit = 1_000): WaveProgress | null {
    const r = rollouts.get(id);
    return r === undefined ? null : progressOf(r, lookup, graceMs, limit);
  }

  function progressAt(s: RolloutState, limit?: number): WaveProgress | null | undefined {
    return rollouts.get(s.id)?.state.revision === s.revision ? progress(s.id, limit) : undefined;
  }

  function progressFolded(id: string, limit?: number): ProgressFolded | undefined {
    const r = rollouts.get(id);
    if (r === undefined) return undefined;
    return {
      revision: r.state.revision,
      current: r.state.current,
      progress: progressOf(r, lookup, graceMs, limit),
      tracks: (node) => entryOf(r, node) !== undefined,
    };
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
    progressFolded,
    nodeOf,
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
