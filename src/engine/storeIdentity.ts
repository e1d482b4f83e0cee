import { randomBytes } from 'node:crypto';
import type { EventStore } from '../store/index.ts';

// A store's identity: a random 64-bit number made the first time an engine asks and kept in the
// store itself (as a checkpoint, which every adapter keeps), so every engine of one store, an HA
// pair's included, reads the same and an engine of another store another. `serve` names its store
// by it on the broker (src/transport/vhostOwner.ts, docs/operations.md#one-store-per-vhost).

const checkpointName = 'store-identity';

const hex = (v: bigint): string => v.toString(16).padStart(16, '0');

/** The store's identity as 16 lowercase hex digits, made and kept on the first call. */
export async function storeIdentity(store: EventStore): Promise<string> {
  const kept = await store.getCheckpoint(checkpointName);
  if (kept !== null) return hex(kept);
  // Two engines of one fresh shared store may start at once: the lease lets one make it.
  const hold = store.acquireLease === undefined ? null : await store.acquireLease(checkpointName, AbortSignal.timeout(60_000));
  try {
    const now = await store.getCheckpoint(checkpointName);
    if (now !== null) return hex(now);
    // 62 bits: positive in every adapter's checkpoint column (PostgreSQL's is a signed bigint).
    const made = randomBytes(8).readBigUInt64BE() >> 2n;
    await store.setCheckpoint(checkpointName, made);
    return hex((await store.getCheckpoint(checkpointName)) ?? made);
  } finally {
    await hold?.release();
  }
}
