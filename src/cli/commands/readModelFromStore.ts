import type { NodeState } from '../../../projections/index.ts';
import { replayStore } from '../../readModel/replay.ts';
import type { EventStore } from '../../store/index.ts';
import type { CliIo } from '../io.ts';
import { progress } from '../output.ts';

/** Fold the whole store (read commands work without a running server), with progress on a TTY. */
export async function foldStore(
  store: EventStore,
  io: CliIo,
  label = 'folding',
  until: bigint | null = null,
): Promise<Map<string, NodeState>> {
  const head = await store.headPosition();
  const p = progress(io, label);
  try {
    return await replayStore(store, { until, onProgress: (_n, pos) => p.update(Number(pos), head === null ? null : Number(head)) });
  } finally {
    p.done();
  }
}
