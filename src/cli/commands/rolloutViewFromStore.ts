import type { ReadModel } from '../../readModel/readModel.ts';
import type { RolloutView } from '../../readModel/rollouts.ts';
import { foldRolloutSlice } from '../../readModel/rolloutSlice.ts';
import type { EventStore } from '../../store/index.ts';
import type { CliIo } from '../io.ts';
import { progress } from '../output.ts';

// The rollout commands read what the API serves, computed the same way: the live rollout view
// (src/readModel/rollouts.ts) over a read model, in this process, so they work without a running
// server. Not over the whole store (a year of history is minutes of folding): over the rollouts'
// own streams and what of their targets' streams the view needs (rolloutSlice.ts; docs/cli.md
// "Rollout reads"). `follow` keeps folding what is appended (--watch).

export type FoldedRollouts = Readonly<{
  readModel: ReadModel;
  rollouts: RolloutView;
  /** Fold what is appended from now on; resolves to a stop function. */
  follow: (onFolded: () => void) => () => Promise<void>;
}>;

/** The view of rollout `wanted`, or of every rollout when it is null. */
export async function foldRollouts(store: EventStore, io: CliIo, wanted: string | null): Promise<FoldedRollouts> {
  const p = progress(io, 'reading targets');
  let slice;
  try {
    slice = await foldRolloutSlice(store, wanted, (done, total) => p.update(done, total));
  } finally {
    p.done();
  }
  const { readModel, rollouts, head } = slice;
  return {
    readModel,
    rollouts,
    follow(onFolded) {
      // From the head the slice was read at: every event after it is folded, whichever node's.
      const sub = store.subscribe({
        after: head,
        handler: (events) => {
          readModel.apply(events);
          onFolded();
        },
      });
      return () => sub.stop();
    },
  };
}
