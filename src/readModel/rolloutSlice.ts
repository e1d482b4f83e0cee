import { foldRollout, startRollout } from '../../projections/index.ts';
import type { RolloutState } from '../core/rollout/index.ts';
import type { Recorded, RolloutEvent } from '../core/events/index.ts';
import { sendHistoryLimit } from '../../projections/index.ts';
import { rolloutEventTypes, rolloutOfStream, rolloutStreamPrefix, streamOf } from '../core/events/index.ts';
import type { EventStore } from '../store/index.ts';
import { createReadModel } from './readModel.ts';
import type { ReadModel } from './readModel.ts';
import { createRolloutView } from './rollouts.ts';
import type { RolloutView } from './rollouts.ts';

// The rollout view of one rollout (or of every rollout) without folding the whole store
// (docs/cli.md "Rollout reads"): the rollouts' own streams, and of each target's stream only
// what the view can tell from a fold of all of it, folded in store order into an empty read
// model with the live view on it (rollouts.ts), exactly as `serve` folds the same events.
//
// What the view reads of a node (rollouts.ts, rolloutSummary.ts, rolloutNodes.ts, the rollback's
// progress) is its latest send with when it was acknowledged, its latest report (declared digest,
// applied, failed, refused, and whether it was stale or unknown), what follows from the two
// (status, missing), and whether a report was folded since the rollout tracked it. At the
// rollout's start those come from the node's latest report and the sends after it, and whether a
// report names an earlier send from the last `sendHistoryLimit` sends before it: so each target's
// stream is read from its end back to `sendHistoryLimit` sends before its latest report before the
// rollout, or to its start. Fields that need the whole stream (the latest sign of life, counters)
// are not the view's and are not exact in this read model.

const page = 64;

export type RolloutSlice = Readonly<{
  readModel: ReadModel;
  rollouts: RolloutView;
  /** The store's head when the slice was read: nothing after it was folded, everything before it that the view needs was. */
  head: bigint | null;
  /** Events folded, and target streams read. */
  events: number;
  streams: number;
}>;

const isRolloutEvent = (e: Recorded): e is Recorded<RolloutEvent> => (rolloutEventTypes as readonly string[]).includes(e.type);

/** Every rollout's events (only `wanted`'s when given) up to `head`, in store order. */
async function rolloutEvents(store: EventStore, wanted: string | null, head: bigint): Promise<Recorded<RolloutEvent>[]> {
  const out: Recorded<RolloutEvent>[] = [];
  for await (const batch of store.readAll({ streamPrefix: rolloutStreamPrefix })) {
    for (const e of batch) {
      if (e.position > head) return out;
      if (!isRolloutEvent(e)) continue;
      if (wanted !== null && (rolloutOfStream(e.stream) ?? e.data.rollout) !== wanted) continue;
      out.push(e);
    }
  }
  return out;
}

/** node → the position of the first event of the earliest rollout that names it (its cut). */
function cutsOf(events: readonly Recorded<RolloutEvent>[]): Map<string, bigint> {
  const states = new Map<string, { state: RolloutState; from: bigint }>();
  for (const e of events) {
    const id = rolloutOfStream(e.stream) ?? e.data.rollout;
    const at = states.get(id);
    if (at === undefined) {
      const state = startRollout(e);
      if (state !== null) states.set(id, { state, from: e.position });
    } else if (e.position > at.state.position) at.state = foldRollout(at.state, e);
  }
  const cuts = new Map<string, bigint>();
  const cut = (node: string, from: bigint): void => {
    const had = cuts.get(node);
    if (had === undefined || from < had) cuts.set(node, from);
  };
  for (const { state, from } of states.values()) {
    for (const node of state.targets) cut(node, from);
    for (const node of state.sends.keys()) cut(node, from);
    for (const node of state.skipped.keys()) cut(node, from);
    for (const node of state.rollback?.sends.keys() ?? []) cut(node, from);
  }
  return cuts;
}

/**
 * The events of `node`'s stream the view needs, oldest first: all from `cut` on (up to `head`),
 * and before it back to the `sendHistoryLimit` sends before its latest report.
 */
async function nodeSuffix(store: EventStore, node: string, cut: bigint, head: bigint): Promise<Recorded[]> {
  const stream = streamOf(node);
  const out: Recorded[] = [];
  let reportSeen = false;
  let sendsBeforeReport = 0;
  let from: bigint | undefined;
  for (;;) {
    const batch = await store.readStream(stream, {
      direction: 'backwards',
      limit: page,
      ...(from === undefined ? {} : { fromRevision: from }),
    });
    for (const e of batch) {
      if (e.position > head) continue;
      out.push(e);
      if (e.position >= cut) continue;
      if (e.type === 'ReportReceived') reportSeen = true;
      else if (e.type === 'DeclarationSent' && reportSeen && ++sendsBeforeReport >= sendHistoryLimit) return out.reverse();
    }
    const last = batch[batch.length - 1];
    if (batch.length < page || last === undefined || last.revision === 0n) return out.reverse();
    from = last.revision - 1n;
  }
}

/**
 * Fold the slice of the store the rollout view needs for `wanted` (null: every rollout).
 * `onProgress` hears the target streams read so far and how many there are.
 */
export async function foldRolloutSlice(
  store: EventStore,
  wanted: string | null,
  onProgress: (done: number, total: number) => void = () => {},
): Promise<RolloutSlice> {
  const readModel = createReadModel();
  const rollouts = createRolloutView(readModel);
  const head = await store.headPosition();
  if (head === null) return { readModel, rollouts, head, events: 0, streams: 0 };
  const own = await rolloutEvents(store, wanted, head);
  const cuts = cutsOf(own);
  const events: Recorded[] = [...own];
  let done = 0;
  for (const [node, cut] of cuts) {
    for (const e of await nodeSuffix(store, node, cut, head)) events.push(e);
    if (++done % 1_000 === 0) onProgress(done, cuts.size);
  }
  onProgress(done, cuts.size);
  events.sort((a, b) => (a.position < b.position ? -1 : a.position > b.position ? 1 : 0));
  for (let i = 0; i < events.length; i += 1_000) readModel.apply(events.slice(i, i + 1_000));
  return { readModel, rollouts, head, events: events.length, streams: cuts.size };
}
