import { randomInt } from 'node:crypto';
import { foldNode, initialNodeState, statusOf } from '../../projections/index.ts';
import type { NodeState } from '../../projections/index.ts';
import { isNodeEvent, streamOf } from '../events/index.ts';
import type { EventStore } from '../store/index.ts';
import { compareStates } from './replay.ts';
import { snapshotRejected } from './snapshot.ts';
import type { Snapshot } from './snapshot.ts';

// What a snapshot must pass before the runner serves it (issue 13 item 3: a snapshot with forged
// values and the right foldVersion, position and event id was restored and served). The file's
// own checks (snapshot.ts: checksum, a zod schema of every section) catch rot and wrong types;
// these catch a snapshot that is well-formed and says something the store does not:
//   - every node: the fields the fold derives (status, caughtUp, missing) are what statusOf
//     gives for its send and report, the carried ports are the report's, and nothing is past
//     the snapshot's position;
//   - sampled nodes: their streams, read from the store and folded up to the snapshot's
//     position, give exactly the state the snapshot holds (a forged count, a phantom node).
// Sampling is a bet, not a proof: a forger who changes one node of 100,000 is caught with
// probability samples/nodes. `converge replay --verify` stays the deep check.

/** Nodes re-folded from the store per restore: a stream read each (a few ms in all on SQLite). */
export const crossCheckSamples = 24;

const none: readonly never[] = [];
function sameList<T>(a: readonly T[], b: readonly T[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Throws CONVERGE_ERR_SNAPSHOT_INVALID (reason `inconsistent`) naming the first node that contradicts itself. */
export function checkConsistency(snap: Snapshot): void {
  // (No closure per node: 100,000 of them were garbage made at every warm start.)
  const fail = (s: NodeState, what: string): never => {
    throw snapshotRejected('inconsistent', `snapshot node ${JSON.stringify(s.node)}: ${what}`);
  };
  for (const s of snap.states) {
    const derived = statusOf(s.sent, s.reported);
    if (derived.status !== s.status || derived.caughtUp !== s.caughtUp)
      fail(s, `status ${s.status}/caughtUp ${s.caughtUp}, but its send and report give ${derived.status}/${derived.caughtUp}`);
    if (!sameList(derived.missing, s.missing)) fail(s, 'missing resources differ from what its send and report give');
    if (!sameList(s.carried, s.reported?.carried ?? none)) fail(s, "carried ports differ from its latest report's");
    if (s.position > snap.position) fail(s, `position ${s.position} is past the snapshot's ${snap.position}`);
    if (s.reported === null ? s.reports !== 0 : s.reports === 0)
      fail(s, `${s.reports} reports folded, but report ${s.reported === null ? 'absent' : 'present'}`);
  }
}

/** Re-fold `samples` nodes (chosen at random, each time) from the store up to the snapshot's position and compare. */
export async function crossCheck(store: EventStore, snap: Snapshot, samples = crossCheckSamples): Promise<{ checked: number }> {
  const states = snap.states;
  const picked = new Set<number>();
  const want = Math.min(samples, states.length);
  while (picked.size < want) picked.add(states.length <= samples ? picked.size : randomInt(states.length));
  for (const i of picked) {
    const claimed = states[i]!;
    let folded: NodeState = initialNodeState(claimed.node);
    for (const e of await store.readStream(streamOf(claimed.node))) {
      if (e.position > snap.position) break;
      if (isNodeEvent(e)) folded = foldNode(folded, e);
    }
    const diffs = compareStates(new Map([[claimed.node, folded]]), [claimed]);
    if (diffs.length > 0) {
      const d = diffs[0]!;
      throw snapshotRejected(
        'cross-check',
        `snapshot node ${JSON.stringify(claimed.node)} differs from its stream in the store: ${d.field} is ${d.actual} in the snapshot, ${d.expected} folded from the store${diffs.length > 1 ? ` (and ${diffs.length - 1} more field(s))` : ''}`,
      );
    }
  }
  return { checked: want };
}
