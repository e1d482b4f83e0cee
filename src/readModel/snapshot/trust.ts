import { randomInt } from 'node:crypto';
import { foldNode, foldVersion, initialNodeState, statusOf } from '../../../projections/index.ts';
import type { NodeState } from '../../../projections/index.ts';
import { isNodeEvent, streamOf } from '../../core/events/index.ts';
import type { EventStore } from '../../store/index.ts';
import { compareStates } from '../replay.ts';
import { openSnapshot, snapshotRejected } from './snapshotFile.ts';
import type { StoredSnapshot } from './snapshotFile.ts';
import { transitionOfCode } from './transitions.ts';
import type { Transition } from './transitions.ts';

// What a snapshot must pass before the runner serves it (a snapshot with forged
// values and the right foldVersion, position and event id was restored and served). The file's
// own checks (snapshotFile.ts: checksum, a zod schema of every section) catch rot and wrong types;
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

type Derived = ReturnType<typeof statusOf>;
const small = 131_072;

/**
 * Throws CONVERGE_ERR_SNAPSHOT_INVALID (reason `inconsistent`) naming the first node that contradicts itself.
 * Read from the columns, no state built, so a warm start stays cheap: statusOf's answer depends only
 * on whether there is a send and a report, whether the report names the send, whether it refused,
 * and which resource list, applied list and failure map they hold — so it is asked once per such
 * combination, of the first node that has it, and compared with every node that has it.
 */
export function checkConsistency(snap: StoredSnapshot): void {
  const d = snap.states;
  const fail = (i: number, what: string): never => {
    throw snapshotRejected('inconsistent', `snapshot node ${JSON.stringify(d.nodes[i])}: ${what}`);
  };
  const byTables = new Map<number, Derived>();
  const byText = new Map<number | string, Derived>();
  const simple = new Map<number, Derived>();
  const safeEnd = snap.position <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(snap.position) : null;
  for (let i = 0; i < d.length; i++) {
    const f = d.facts(i);
    let derived: Derived | undefined;
    let key: number | string;
    let cache: Map<number | string, Derived> = simple as Map<number | string, Derived>;
    if (!f.sent) key = 0;
    else if (!f.reported || !f.declaredIsSent) key = 1;
    else if (f.refused) key = 2;
    else if (f.resources < small && f.applied < small && f.failed < small) {
      // Three table indices in one number (exact: below 2^51).
      cache = byTables as Map<number | string, Derived>;
      key = (f.resources * small + f.applied) * small + f.failed;
    } else {
      cache = byText;
      key = `${f.resources},${f.applied},${f.failed}`;
    }
    derived = cache.get(key);
    if (derived === undefined) {
      const s = d.state(i);
      derived = statusOf(s.sent, s.reported);
      cache.set(key, derived);
    }
    if (derived.status !== f.status || derived.caughtUp !== f.caughtUp)
      fail(i, `status ${f.status}/caughtUp ${f.caughtUp}, but its send and report give ${derived.status}/${derived.caughtUp}`);
    if (!sameList(derived.missing, f.missing)) fail(i, 'missing resources differ from what its send and report give');
    if (!sameList(f.carried, f.reported ? f.reportedCarried : none)) fail(i, "carried ports differ from its latest report's");
    const p = f.position;
    if (typeof p === 'number' && safeEnd !== null ? p > safeEnd : BigInt(p) > snap.position)
      fail(i, `position ${BigInt(p)} is past the snapshot's ${snap.position}`);
    if (!f.reported ? f.reports !== 0 : f.reports === 0)
      fail(i, `${f.reports} reports folded, but report ${!f.reported ? 'absent' : 'present'}`);
  }
}

/**
 * Throws CONVERGE_ERR_SNAPSHOT_INVALID (reason `fold-version` or `other-store`) unless the snapshot
 * was made by this engine's fold, of this store: the event at its position is the one it names.
 */
export async function checkIdentity(store: EventStore, snap: Pick<StoredSnapshot, 'foldVersion' | 'position' | 'eventId'>): Promise<void> {
  if (snap.foldVersion !== foldVersion)
    throw snapshotRejected('fold-version', `snapshot made by fold ${snap.foldVersion}; this engine folds version ${foldVersion}`);
  let atPosition: string | undefined;
  for await (const batch of store.readAll({ after: snap.position - 1n, limit: 1 })) {
    atPosition = batch[0]?.position === snap.position ? batch[0].id : undefined;
    break;
  }
  if (atPosition !== snap.eventId)
    throw snapshotRejected(
      'other-store',
      `the event at position ${snap.position} is not ${snap.eventId}: the snapshot is of another store`,
    );
}

/**
 * Events the cross-check reads per restore: one per node of the snapshot, at least
 * `crossCheckMinEvents` and at most `crossCheckEventBudget`. Restoring costs about as much per node
 * as reading one event (a few microseconds each), so the check stays a fixed share of the start
 * whatever the history's length; at 20,000 events it was 20 times the restore of a 1,000-node
 * fleet after a long history and a fraction of it after a day. On a long history it checks fewer
 * nodes (at least one: the first drawn is read whole, whatever the budget).
 */
export const crossCheckEventBudget = 20_000;
export const crossCheckMinEvents = 1_000;
export const crossCheckBudgetFor = (nodes: number): number => Math.min(crossCheckEventBudget, Math.max(crossCheckMinEvents, nodes));

/**
 * Re-fold up to `samples` nodes (chosen at random, each time) from the store up to the snapshot's
 * position and compare, reading at most `budget` events. A stream whose first stored event is not
 * its revision 0 began in the archive (docs/operations.md, retention): it cannot be folded from the
 * store alone, and the warm start never reads the archive, so it is passed over and another drawn,
 * having cost the read of that first event only (under retention, every old node's stream). So is
 * one that skips a revision later: its first event was kept hot (its last send or report) and
 * events after it were archived.
 */
export async function crossCheck(
  store: EventStore,
  snap: StoredSnapshot,
  samples = crossCheckSamples,
  budget = crossCheckBudgetFor(snap.states.length),
): Promise<{ checked: number; eventsRead: number; archived: number }> {
  const states = snap.states;
  const want = Math.min(samples, states.length);
  // Each index drawn at most once; a few draws more than wanted leave room for archived streams.
  const order = states.length <= samples * 4 ? shuffled(states.length) : distinctRandom(states.length, samples * 4);
  let checked = 0;
  let eventsRead = 0;
  let archived = 0;
  for (const i of order) {
    if (checked >= want || (checked > 0 && eventsRead >= budget)) break;
    const claimed = states.state(i);
    const first = await store.readStream(streamOf(claimed.node), { limit: 1 });
    eventsRead += first.length;
    if (first.length > 0 && first[0]!.revision !== 0n) {
      archived++;
      continue;
    }
    const stream = first.length === 0 ? first : await store.readStream(streamOf(claimed.node));
    eventsRead += Math.max(0, stream.length - first.length);
    let folded: NodeState = initialNodeState(claimed.node);
    let transition: Transition = null;
    let gap = false;
    for (const [i, e] of stream.entries()) {
      if (e.position > snap.position) break;
      // A revision skipped: events after the kept first one were archived (its last send or report is its first event).
      if ((gap = e.revision !== BigInt(i))) break;
      if (isNodeEvent(e)) folded = foldNode(folded, e);
      if (e.type === 'NodeHeard') transition = 'heard';
      else if (e.type === 'NodeSilent') transition = 'silent';
    }
    if (gap) {
      archived++;
      continue;
    }
    checked++;
    // None kept is unknown, not a claim: a model restored from a format-5 snapshot knows no
    // transition folded before it, and the snapshots it writes say none for those nodes.
    const kept = snap.transitions === null ? null : transitionOfCode(snap.transitions[i]);
    if (kept !== null && kept !== transition)
      throw snapshotRejected(
        'cross-check',
        `snapshot node ${JSON.stringify(claimed.node)} differs from its stream in the store: its latest liveness transition is ${kept ?? 'none'} in the snapshot, ${transition ?? 'none'} in the store`,
      );
    const diffs = compareStates(new Map([[claimed.node, folded]]), [claimed]);
    if (diffs.length > 0) {
      const d = diffs[0]!;
      throw snapshotRejected(
        'cross-check',
        `snapshot node ${JSON.stringify(claimed.node)} differs from its stream in the store: ${d.field} is ${d.actual} in the snapshot, ${d.expected} folded from the store${diffs.length > 1 ? ` (and ${diffs.length - 1} more field(s))` : ''}`,
      );
    }
  }
  return { checked, eventsRead, archived };
}

function shuffled(n: number): number[] {
  const out = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = randomInt(i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

function distinctRandom(n: number, count: number): number[] {
  const picked = new Set<number>();
  while (picked.size < count) picked.add(randomInt(n));
  return [...picked];
}

export type SnapshotOutcome =
  | Readonly<{ kind: 'none' }>
  | Readonly<{ kind: 'trusted'; snap: StoredSnapshot & { path: string } }>
  /** A snapshot was there and failed a check (CONVERGE_ERR_SNAPSHOT_INVALID, its reason in the details): fold from zero and say why. */
  | Readonly<{ kind: 'rejected'; path: string; err: unknown }>;

/**
 * The snapshot at `path` (or `formerPath`) once it passed every check above. The engine's warm start
 * and the CLI's read commands both start from it.
 */
export async function trustedSnapshot(store: EventStore, path: string, formerPath?: string | null): Promise<SnapshotOutcome> {
  let snap: (StoredSnapshot & { path: string }) | null = null;
  try {
    snap = await openSnapshot(path, formerPath);
    if (snap === null) return { kind: 'none' };
    // Made by this fold, and the event at its position the one it saw: same store, same history.
    await checkIdentity(store, snap);
    checkConsistency(snap);
    await crossCheck(store, snap);
    return { kind: 'trusted', snap };
  } catch (err) {
    return { kind: 'rejected', path: snap?.path ?? path, err };
  }
}
