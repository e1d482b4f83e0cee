import { createReadModel } from '../../readModel/readModel.ts';
import type { ReadModel } from '../../readModel/readModel.ts';
import { createRolloutView } from '../../readModel/rollouts.ts';
import type { RolloutView } from '../../readModel/rollouts.ts';
import type { EventStore } from '../../store/index.ts';
import type { CliIo } from '../io.ts';
import { progress } from '../output.ts';

// The rollout commands read what the API serves, computed the same way: the store folded into a
// read model with the live rollout view on it (src/readModel/rollouts.ts), in this process, so
// they work without a running server. `follow` keeps folding what is appended (--watch).

export type FoldedRollouts = Readonly<{
  readModel: ReadModel;
  rollouts: RolloutView;
  /** Fold what is appended from now on; resolves to a stop function. */
  follow: (onFolded: () => void) => () => Promise<void>;
}>;

export async function foldRollouts(store: EventStore, io: CliIo): Promise<FoldedRollouts> {
  const readModel = createReadModel();
  const rollouts = createRolloutView(readModel);
  const head = await store.headPosition();
  const p = progress(io, 'folding');
  try {
    for await (const batch of store.readAll()) {
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
