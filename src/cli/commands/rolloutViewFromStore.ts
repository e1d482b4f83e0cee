import { resolve } from 'node:path';
import type { Config } from '../../app/config.ts';
import { createReadModel } from '../../readModel/readModel.ts';
import type { ReadModel } from '../../readModel/readModel.ts';
import { createRolloutView } from '../../readModel/rollouts.ts';
import type { RolloutView } from '../../readModel/rollouts.ts';
import { rejectionOf } from '../../readModel/snapshot/snapshotFile.ts';
import { trustedSnapshot } from '../../readModel/snapshot/trust.ts';
import type { EventStore } from '../../store/index.ts';
import type { CliIo } from '../io.ts';
import { progress } from '../output.ts';

// The rollout commands read what the API serves, computed the same way: the store folded into a
// read model with the live rollout view on it (src/readModel/rollouts.ts), in this process, so
// they work without a running server, starting from the engine's snapshot when there is one. `follow` keeps folding what is appended (--watch).

export type FoldedRollouts = Readonly<{
  readModel: ReadModel;
  rollouts: RolloutView;
  /** Fold what is appended from now on; resolves to a stop function. */
  follow: (onFolded: () => void) => () => Promise<void>;
}>;

export async function foldRollouts(store: EventStore, io: CliIo, config: Pick<Config, 'snapshotPath'>): Promise<FoldedRollouts> {
  const readModel = createReadModel();
  const rollouts = createRolloutView(readModel);
  const head = await store.headPosition();
  // From the engine's snapshot when it is there and passes the warm start's checks: the commands
  // then read what came after it, not the whole store (a year of history is minutes of folding).
  let after: bigint | null = null;
  if (config.snapshotPath !== null) {
    const outcome = await trustedSnapshot(store, resolve(io.cwd, config.snapshotPath));
    if (outcome.kind === 'trusted') {
      readModel.restore(outcome.snap.states, outcome.snap.position);
      await rollouts.load(store, outcome.snap.position);
      after = outcome.snap.position;
    } else if (outcome.kind === 'rejected') {
      io.stderr(`converge: snapshot ${outcome.path} not used (${rejectionOf(outcome.err)}): folding the whole store\n`);
    }
  }
  const p = progress(io, 'folding');
  try {
    for await (const batch of store.readAll(after === null ? {} : { after })) {
      readModel.apply(batch);
      const last = batch[batch.length - 1];
      if (last !== undefined) p.update(Number(last.position), head === null ? null : Number(head));
    }
  } finally {
    p.done();
  }
  return {
    readModel,
    rollouts,
    follow(onFolded) {
      const sub = store.subscribe({
        after: readModel.position(),
        handler: (events) => {
          readModel.apply(events);
          onFolded();
        },
      });
      return () => sub.stop();
    },
  };
}
