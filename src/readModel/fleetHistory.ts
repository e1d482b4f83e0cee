import { defaultGraceMs, foldNode, initialNodeState, observedSpans } from '../../projections/index.ts';
import type { At, FleetSummaryOptions, NodeState } from '../../projections/index.ts';
import { isNodeEvent, nodeOfStream, observationStream } from '../core/events/index.ts';
import type { EventStore } from '../store/index.ts';
import { createCountLog } from './fleetCountLog.ts';
import type { FleetAsOf, FleetCountLog } from './fleetCountLog.ts';
import type { NodeChange, ReadModel } from './readModel.ts';

export type { FleetAsOf } from './fleetCountLog.ts';

// GET /v1/fleet?at=: the fleet as of a time or position, fast enough to drag a slider.
//
// Folding the store up to the asked moment on every request reads the whole history (seconds over
// a long history). Instead, as the read model folds, this keeps in typed arrays what the fleet summary
// reads of each node's state, as it changed:
// - a *row* each time a node's status, spec, anomaly or convergence counters change (sends and
//   reports; an alive or a repeated report changes none of them and adds no row);
// - its *presence* as intervals of sightings no more than the grace period apart, so a node that
//   says alive every 15 s for a month is one interval, not 170,000 rows;
// - one (position, time) sample per second of history, for the moment a position stands for.
// A node as of p is its last row at or before p, found by walking its rows back from the newest;
// the summary is one pass over the nodes. Memory grows with changes and disconnections, not with
// time. Liveness inside an interval is exact when event times follow positions, as the engine's
// appends do.
//
// The history must start at the store's first event. A read model restored from a snapshot folds
// only what came after it, so the first question then folds the store once from zero up to the
// read model's position (live changes meanwhile are buffered and appended after).
//
// The history itself, its rows and the summary made from them, is fleetCountLog.ts (its presence
// intervals fleetPresence.ts); this file keeps it in step with the read model and folds it again
// when it must.

export type FleetHistory = Readonly<{
  at: (at: At, options?: FleetSummaryOptions) => Promise<FleetAsOf>;
  /** What is held: rows, presence intervals, bytes of typed arrays; complete = starts at the store's first event (null: not checked yet). */
  stats: () => Readonly<{ rows: number; intervals: number; bytes: number; complete: boolean | null }>;
  stop: () => void;
}>;

export type FleetHistoryOptions = Readonly<{
  store: EventStore;
  readModel: ReadModel;
  graceMs?: number;
  /**
   * The store to fold from its first event: `store` with its archive merged in when serve has
   * --archive-dir (src/app/pastReads.ts). The hot store alone starts where the archive ends: a
   * history folded from it misses every archived event, yet looks complete. Default: `store`.
   */
  pastReads?: () => Promise<EventStore>;
}>;

/** Start recording as the read model folds: create it before the projections start, so a cold start records everything once. */
export function createFleetHistory({ store, readModel, graceMs = defaultGraceMs, pastReads }: FleetHistoryOptions): FleetHistory {
  const whole = pastReads ?? (() => Promise.resolve(store));
  let log: FleetCountLog = createCountLog(graceMs);
  let complete: boolean | null = null;
  let rebuilding: Promise<void> | null = null;
  let buffer: NodeChange[] | null = null;

  /** Moves when the read model folded events this history did not hear (a bulk catch-up): it is not complete then. */
  let gaps = 0;
  const stop = readModel.onChange(
    (c) => {
      if (buffer !== null) buffer.push(c);
      else log.record(c.node, c.event, c.state);
    },
    {
      // A cold start's bulk catch-up publishes states without a change per event: as after a
      // snapshot restore, the history is folded from the store when first asked.
      bulk: () => {
        gaps++;
        complete = false;
        log = createCountLog(graceMs);
      },
    },
  );

  /** Does the history start at the store's first event? Once it does, it always will. */
  async function checkComplete(): Promise<boolean> {
    if (complete === true) return true;
    let first: bigint | null = null;
    for await (const batch of (await whole()).readAll({ streamPrefix: 'node-', limit: 1 })) {
      first = batch[0]?.position ?? null;
      break;
    }
    complete = first === null || log.firstPosition() === first;
    return complete;
  }

  /** Fold the store from zero up to the read model's position into a new history, then follow the read model again. */
  async function rebuild(): Promise<void> {
    const gapsBefore = gaps;
    const pending: NodeChange[] = [];
    buffer = pending;
    try {
      const upTo = readModel.position();
      const next = createCountLog(graceMs);
      const states = new Map<string, NodeState>();
      if (upTo !== null) {
        const from = await whole();
        outer: for await (const batch of from.readAll({ streamPrefix: 'node-' })) {
          for (const e of batch) {
            if (e.position > upTo) break outer;
            if (!isNodeEvent(e)) continue;
            const node = nodeOfStream(e.stream) ?? e.data.node;
            const s = foldNode(states.get(node) ?? initialNodeState(node), e);
            states.set(node, s);
            next.record(node, e, s);
          }
        }
      }
      for (const c of pending) if (upTo === null || c.position > upTo) next.record(c.node, c.event, c.state);
      log = next;
      // A bulk catch-up published meanwhile: what it folded past `upTo` was never heard; ask again.
      complete = gaps === gapsBefore;
    } finally {
      buffer = null;
    }
  }

  return {
    async at(at, options = {}) {
      if (!(await checkComplete())) {
        rebuilding ??= rebuild().finally(() => (rebuilding = null));
        await rebuilding;
      }
      // Observation spans are few (one per start and stop): read each time, never stale. Their
      // stream is never archived, so the hot store holds it whole.
      return log.summarize(at, options, observedSpans(await store.readStream(observationStream)));
    },
    stats: () => ({ ...log.stats(), complete }),
    stop,
  };
}
