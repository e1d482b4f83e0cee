import { resolve } from 'node:path';
import type { Config } from '../../app/config.ts';
import { createReadModel } from '../../readModel/readModel.ts';
import type { ReadModel } from '../../readModel/readModel.ts';
import { createRolloutView } from '../../readModel/rollouts.ts';
import type { RolloutView } from '../../readModel/rollouts.ts';
import { foldRolloutSlice } from '../../readModel/rolloutSlice.ts';
import { rejectionOf } from '../../readModel/snapshot/snapshotFile.ts';
import { trustedSnapshot } from '../../readModel/snapshot/trust.ts';
import type { EventStore } from '../../store/index.ts';
import type { CliIo } from '../io.ts';
import { progress } from '../output.ts';

// The rollout commands read what the API serves, computed the same way: the live rollout view
// (src/readModel/rollouts.ts) over a read model, in this process, so they work without a running
// server. Never over the whole store (a year of history is minutes of folding): from the
// engine's snapshot and what came after it when the snapshot passes the warm start's checks, as a
// warm-started engine answers; otherwise from the rollouts' own streams and what of their
// targets' streams the view needs (rolloutSlice.ts), as an engine folded from zero answers
// (docs/cli.md "Rollout reads"). `follow` keeps folding what is appended (--watch).

export type FoldedRollouts = Readonly<{
  readModel: ReadModel;
  rollouts: RolloutView;
  /** Fold what is appended from now on; resolves to a stop function. */
  follow: (onFolded: () => void) => () => Promise<void>;
}>;

const following =
  (store: EventStore, readModel: ReadModel, after: bigint | null): FoldedRollouts['follow'] =>
  (onFolded) => {
    const sub = store.subscribe({
      after,
      handler: (events) => {
        readModel.apply(events);
        onFolded();
      },
    });
    return () => sub.stop();
  };

/** From a trusted snapshot: the model it restores, the rollouts' events up to it, everything after it. Null when there is none. */
async function fromSnapshot(store: EventStore, io: CliIo, snapshotPath: string): Promise<FoldedRollouts | null> {
  const outcome = await trustedSnapshot(store, resolve(io.cwd, snapshotPath));
  if (outcome.kind === 'rejected')
    io.stderr(`converge: snapshot ${outcome.path} not used (${rejectionOf(outcome.err)}): reading the rollouts' targets\n`);
  if (outcome.kind !== 'trusted') return null;
  const readModel = createReadModel();
  const rollouts = createRolloutView(readModel);
  const head = await store.headPosition();
  readModel.restore(outcome.snap.states, outcome.snap.position, outcome.snap.transitions);
  await rollouts.load(store, outcome.snap.position);
  const p = progress(io, 'folding');
  try {
    for await (const batch of store.readAll({ after: outcome.snap.position })) {
      readModel.apply(batch);
      const last = batch[batch.length - 1];
      if (last !== undefined) p.update(Number(last.position), head === null ? null : Number(head));
    }
  } finally {
    p.done();
  }
  return { readModel, rollouts, follow: following(store, readModel, readModel.position()) };
}

/** The view of rollout `wanted`, or of every rollout when it is null. */
export async function foldRollouts(
  store: EventStore,
  io: CliIo,
  config: Pick<Config, 'snapshotPath'>,
  wanted: string | null,
): Promise<FoldedRollouts> {
  const warm = config.snapshotPath === null ? null : await fromSnapshot(store, io, config.snapshotPath);
  if (warm !== null) return warm;
  const p = progress(io, 'reading targets');
  let slice;
  try {
    slice = await foldRolloutSlice(store, wanted, (done, total) => p.update(done, total));
  } finally {
    p.done();
  }
  // From the head the slice was read at: every event after it is folded, whichever node's.
  return { readModel: slice.readModel, rollouts: slice.rollouts, follow: following(store, slice.readModel, slice.head) };
}
