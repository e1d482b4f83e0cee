import {
  eventTime,
  foldNodeEvents,
  newerLastSeen,
  nodeView,
  observedSpans,
  recordedLivenessAt,
  stateAt,
  windowEnough,
} from '../../projections/index.ts';
import type { At, NodeState, NodeView, ObservedSpan, TimelineWindow } from '../../projections/index.ts';
import { ConvergeError } from '../core/errors.ts';
import type { NodeEvent, Recorded } from '../core/events/index.ts';
import { isNodeEvent, observationStream, streamOf } from '../core/events/index.ts';
import type { EventStore, StreamMoment } from '../store/index.ts';

// Questions about one node that the API and the CLI both answer, answered one way. Each reads
// the node's own stream (never the whole store), so its cost is the node's history, not the
// fleet's (`status <node>` took 4.6 s on a 100,000-node store when it folded everything).

/** The one "node not found" error (docs/design.md §7: 404 in the API, exit 1 in the CLI). */
export const nodeNotFound = (node: string): ConvergeError =>
  new ConvergeError('CONVERGE_ERR_NODE_NOT_FOUND', `no event has ever named node ${JSON.stringify(node)}`, { details: { node } });

/** A node's whole stream, oldest first; a node with no event is not found. */
export async function readNodeStream(store: EventStore, node: string): Promise<readonly Recorded[]> {
  const events = await store.readStream(streamOf(node));
  if (events.length === 0) throw nodeNotFound(node);
  return events;
}

/**
 * A node's stream as it stood at `to`: its events up to the last one within it (docs/design.md §3,
 * "As of a time"), the same prefix the whole stream gives. Read as of `to`, so the archive's
 * segments past it are left out (docs/store.md "Segment time ranges").
 */
export async function readNodeStreamAsOf(store: EventStore, node: string, to: At): Promise<readonly Recorded[]> {
  const events = await store.readStream(streamOf(node), { asOf: momentOf(to) });
  if (events.length === 0) throw nodeNotFound(node);
  return events.slice(0, stateAt(node, events, to).folded);
}

/**
 * What `history <node> --from` folds: a suffix of the node's stream (ReadStreamOptions.since) that
 * holds what the window's entries and declarations need (windowEnough), as of `to`; the archive's
 * segments before it, and past `to`, are not read. timelineWindow answers from it.
 */
export async function readNodeWindow(store: EventStore, node: string, w: TimelineWindow): Promise<readonly Recorded[]> {
  const events = await store.readStream(streamOf(node), {
    ...(w.to === null ? {} : { asOf: momentOf(w.to) }),
    since: { moment: momentOf(w.from), enough: windowEnough(node, w) },
  });
  if (events.length === 0) throw nodeNotFound(node);
  return events;
}

/** The store's moment (ReadStreamOptions.asOf) for a fold's `at`. */
export const momentOf = (at: At): StreamMoment => (at.kind === 'time' ? { time: at.time } : { position: at.position });

/**
 * The folded last-seen time, or the exact one the ingest holds in memory if newer (alive is
 * coalesced in the store, docs/design.md §2): what the API, the metrics and the CLI call "last seen".
 */
export const withExactLastSeen = (state: NodeState, exact: Date | string | null | undefined): NodeState => {
  const lastSeenAt = newerLastSeen(state.lastSeenAt, exact);
  return lastSeenAt === state.lastSeenAt ? state : { ...state, lastSeenAt };
};

/** A node's current state folded from its own stream (for a process without a read model). */
/**
 * A node's view now, read from the store (the CLI's `status <node>`): liveness as `stateAsOf` judges
 * it as of now, from the record (the engine's transitions, whether an engine observes), so the two
 * answer alike; `graceMs` counts only for a history recorded before transitions.
 */
export async function currentNode(store: EventStore, node: string, now: number, graceMs?: number): Promise<NodeView> {
  const events = await readNodeStream(store, node);
  return nodeView(foldNodeEvents(node, events), now, graceMs, recordedLivenessAt(events, now, await readObservedSpans(store), graceMs));
}

export type StateAsOf = Readonly<{ folded: number; total: number; state: NodeView }>;

/** When engines observed, from the observation stream (empty for a store written before spans were recorded). */
export async function readObservedSpans(store: EventStore): Promise<ObservedSpan[]> {
  return observedSpans(await store.readStream(observationStream));
}

/**
 * docs/design.md §3: "state as of time T or position P" is the same fold, stopped. Liveness is judged as
 * of that moment too (the asked time, or the time of the last event folded), from the record: its
 * transitions with the engine's own grace, and its observation spans (recordedLiveness.ts).
 * `graceMs` counts only for a history recorded before transitions.
 */
export async function stateAsOf(store: EventStore, node: string, at: At, graceMs?: number): Promise<StateAsOf> {
  // Events past the moment may be left out (an archive's later segments): the fold stops before them.
  const events = await store.readStream(streamOf(node), { asOf: momentOf(at) });
  if (events.length === 0) throw nodeNotFound(node);
  const r = stateAt(node, events, at);
  const moment = at.kind === 'time' ? at.time : r.lastEventAt === null ? 0 : Date.parse(r.lastEventAt);
  const folded = events.slice(0, r.folded);
  const liveness = recordedLivenessAt(folded, moment, await readObservedSpans(store), graceMs);
  // Revisions count from 0 with no gap and the stream's last event is always read: it tells the total.
  const total = Number(events[events.length - 1]!.revision) + 1;
  return { folded: r.folded, total, state: nodeView(r.state, moment, graceMs, liveness) };
}

export type HistoryEntry = Readonly<{
  position: string;
  revision: string;
  id: string;
  type: NodeEvent['type'];
  at: string;
  data: NodeEvent['data'];
}>;
export type HistoryPage = Readonly<{ node: string; events: readonly HistoryEntry[]; next: string | null }>;

const pageSize = 256;

/** A node's events newest first, `limit` at a time, below `before` (exclusive); `next` pages on. */
export async function historyPage(store: EventStore, node: string, limit: number, before: bigint | null): Promise<HistoryPage> {
  const events: Recorded<NodeEvent>[] = [];
  let from: bigint | undefined;
  let any = false;
  // Read backwards in pages, skipping what lies at or after `before`; one more than asked tells whether there is a next page.
  for (;;) {
    const page = await store.readStream(streamOf(node), {
      direction: 'backwards',
      limit: pageSize,
      ...(from === undefined ? {} : { fromRevision: from }),
    });
    if (page.length > 0) any = true;
    for (const e of page) if (isNodeEvent(e) && (before === null || e.position < before) && events.length <= limit) events.push(e);
    const last = page[page.length - 1];
    if (page.length < pageSize || last === undefined || last.revision === 0n || events.length > limit) break;
    from = last.revision - 1n;
  }
  if (!any) throw nodeNotFound(node);
  const more = events.length > limit;
  const shown = events.slice(0, limit);
  return {
    node,
    events: shown.map((e) => ({
      position: e.position.toString(),
      revision: e.revision.toString(),
      id: e.id,
      type: e.type,
      at: eventTime(e),
      data: e.data,
    })),
    next: more ? (shown.at(-1)?.position.toString() ?? null) : null,
  };
}
