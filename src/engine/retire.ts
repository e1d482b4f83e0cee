import { foldNodeEvents } from '../../projections/index.ts';
import type { NodeState } from '../../projections/index.ts';
import { ConvergeError, isConvergeError } from '../core/errors.ts';
import { makeNodeRetired, streamOf } from '../core/events/index.ts';
import { validateNodeId } from '../core/wire/nodeId.ts';
import type { EventStore } from '../store/index.ts';

// Retiring a decommissioned node (docs/design.md §3 "Retired nodes"): a NodeRetired appended to
// its stream, after the event the caller saw last. The node leaves the fleet's views and counts;
// its history stays, and a later send brings it back.

export type RetireResult = Readonly<{ node: string; retiredAt: string; position: bigint | null; state: NodeState }>;

/** Appends that lost a race with the node's own events (a last report) are tried again this often. */
const attempts = 5;

/**
 * Retire `node`: CONVERGE_ERR_NODE_NOT_FOUND if no event names it, CONVERGE_ERR_NODE_RETIRED if it
 * is retired already. The stream is folded to know; retiring is rare, so reading it whole is fine.
 */
export async function retireNode(
  store: EventStore,
  node: string,
  options: Readonly<{ now: Date; reason?: string }>,
): Promise<RetireResult> {
  validateNodeId(node);
  const stream = streamOf(node);
  for (let attempt = 1; ; attempt++) {
    const events = await store.readStream(stream);
    if (events.length === 0) throw new ConvergeError('CONVERGE_ERR_NODE_NOT_FOUND', `no event names node ${node}`, { details: { node } });
    const state = foldNodeEvents(node, events);
    if (state.retiredAt !== null) {
      throw new ConvergeError('CONVERGE_ERR_NODE_RETIRED', `node ${node} is retired already (since ${state.retiredAt})`, {
        details: { node, retiredAt: state.retiredAt },
      });
    }
    const revision = events[events.length - 1]!.revision;
    const event = makeNodeRetired(node, revision, options.now, options.reason ?? '');
    try {
      const r = await store.append([{ stream, expected: revision, events: [event] }]);
      return { node, retiredAt: event.data.at, position: r.position, state };
    } catch (err) {
      if (!isConvergeError(err, 'CONVERGE_ERR_WRONG_EXPECTED_REVISION') || attempt >= attempts) throw err;
    }
  }
}
