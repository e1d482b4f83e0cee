import { foldHolds, holdOf, noHolds } from '../../projections/index.ts';
import type { Holds, NodeHold } from '../../projections/index.ts';
import { ConvergeError, isConvergeError } from '../core/errors.ts';
import { holdsStream, makeHoldEvent, streamOf } from '../core/events/index.ts';
import type { HoldEvent, HoldEventType, Recorded } from '../core/events/index.ts';
import { validateNodeId } from '../core/wire/nodeId.ts';
import type { EventStore } from '../store/port.ts';

// Holds and pins (docs/design.md §8 "Holds and pins"): the operator's commands, which append to
// the `holds` stream, and the reader every sender consults. The stream is short (one event per
// command), so the reader keeps its fold and reads only what was appended since, before each
// decision that depends on it: a hold recorded before a wave's send is always seen by that send.

export type HoldVerb = 'hold' | 'release' | 'pin' | 'unpin';

const typeOf: Readonly<Record<HoldVerb, HoldEventType>> = {
  hold: 'NodeHeld',
  release: 'NodeReleased',
  pin: 'NodePinned',
  unpin: 'NodeUnpinned',
};

export type HoldsReader = Readonly<{
  /** Read what `holds` gained since the last call, and answer the fold. */
  refresh: () => Promise<Holds>;
  /** The fold as the last refresh left it (for synchronous views). */
  latest: () => Holds;
}>;

export function createHoldsReader(store: EventStore): HoldsReader {
  let holds = noHolds;
  let reading: Promise<Holds> | null = null;
  const read = async (): Promise<Holds> => {
    const events = (await store.readStream(holdsStream, { fromRevision: holds.revision + 1n })) as Recorded<HoldEvent>[];
    holds = foldHolds(holds, events);
    return holds;
  };
  return {
    // Concurrent callers share one read that began after they called, or the one under way then
    // plus one more: never an answer from a read that began before the call.
    refresh: () => {
      const after = (reading ?? Promise.resolve(holds)).then(read, read);
      reading = after;
      // Both outcomes clear it; a failed read is the caller's to handle, not an unhandled rejection here.
      const settled = (): void => {
        if (reading === after) reading = null;
      };
      after.then(settled, settled);
      return after;
    },
    latest: () => holds,
  };
}

export type HoldResult = Readonly<{ node: string; verb: HoldVerb; at: string; position: bigint | null; hold: NodeHold }>;

/**
 * Hold, release, pin or unpin `node`: CONVERGE_ERR_NODE_NOT_FOUND if no event names it,
 * CONVERGE_ERR_HOLD_STATE if it is held (pinned) already, or not held (pinned) to release (unpin).
 */
export async function setHold(
  store: EventStore,
  node: string,
  verb: HoldVerb,
  options: Readonly<{ now: Date; by: string; reason?: string }>,
): Promise<HoldResult> {
  validateNodeId(node);
  if ((await store.readStream(streamOf(node), { limit: 1 })).length === 0)
    throw new ConvergeError('CONVERGE_ERR_NODE_NOT_FOUND', `no event names node ${node}`, { details: { node } });
  for (let attempt = 1; ; attempt++) {
    const h = foldHolds(noHolds, (await store.readStream(holdsStream)) as Recorded<HoldEvent>[]);
    const was = holdOf(h, node);
    const on = verb === 'hold' || verb === 'pin';
    const mark = verb === 'hold' || verb === 'release' ? was.held : was.pinned;
    const what = verb === 'hold' || verb === 'release' ? 'held' : 'pinned';
    if (on === (mark !== null))
      throw new ConvergeError(
        'CONVERGE_ERR_HOLD_STATE',
        on ? `node ${node} is ${what} already (since ${mark!.at}, by ${mark!.by})` : `node ${node} is not ${what}`,
        { details: { node, [what]: mark } },
      );
    const data = { node, by: options.by, reason: options.reason ?? '', at: options.now.toISOString() };
    const event = makeHoldEvent(typeOf[verb], data, h.revision < 0n ? null : h.revision);
    try {
      const r = await store.append([{ stream: holdsStream, expected: h.revision < 0n ? 'no_stream' : h.revision, events: [event] }]);
      const after = foldHolds(h, [{ ...event, stream: holdsStream, revision: h.revision + 1n, position: r.position ?? 0n }]);
      return { node, verb, at: data.at, position: r.position, hold: holdOf(after, node) };
    } catch (err) {
      // Another operator's hold of some node went first: read again (a few times at most).
      if (!isConvergeError(err, 'CONVERGE_ERR_WRONG_EXPECTED_REVISION') || attempt >= 5) throw err;
    }
  }
}

/** The refusal of a direct send to a pinned node (force: send anyway). */
export const pinnedError = (node: string, pinned: NonNullable<NodeHold['pinned']>): ConvergeError =>
  new ConvergeError(
    'CONVERGE_ERR_NODE_PINNED',
    `node ${node} is pinned (since ${pinned.at}, by ${pinned.by}${pinned.reason === '' ? '' : `: ${pinned.reason}`}): it keeps its spec; unpin it, or send with force`,
    { details: { node, pinned } },
  );
