import { makeAliveSeen, streamOf } from '../../src/core/events/index.ts';
import type { Recorded } from '../../src/core/events/index.ts';
import type { EventStore } from '../../src/store/port.ts';
import { prng } from './prng.ts';

// A small archivable history for the stream-filter tests (test/store/archiveStreamFilter.test.ts
// on SQLite, postgresStreamFilter.test.ts): nodes seen at random over 120 days, the same every run.

/**
 * Into `store` (closed at the end): 40 nodes' AliveSeen over the 120 days to about a week ago, interleaved at random (some nodes far more often
 * than others), plus nodes seen three times in a row only (their archived events in one segment).
 */
export async function randomFleet(store: EventStore, seed: number): Promise<{ nodes: string[]; head: bigint }> {
  const rand = prng(seed);
  const nodes = Array.from({ length: 40 }, (_, i) => `n${i}`);
  const solos = Array.from({ length: 6 }, (_, i) => `solo${i}`);
  let t = Date.now() - 120 * 86_400_000;
  const append = async (node: string): Promise<void> => {
    t += 60_000 + Math.floor(rand() * 6 * 3_600_000);
    await store.append([{ stream: streamOf(node), expected: 'any', events: [makeAliveSeen({ node }, t)] }]);
  };
  for (let i = 0; i < 900; i++) {
    if (i % 150 === 75) for (let k = 0; k < 3; k++) await append(solos[i / 150 - 0.5]!);
    // Squared: low-numbered nodes far more often, the high ones a few times in all.
    await append(nodes[Math.floor(rand() * rand() * nodes.length)]!);
  }
  const head = (await store.headPosition())!;
  await store.close();
  return { nodes: [...nodes, ...solos, 'never-seen'], head };
}

/** The same store, with no stream filter: every segment is opened, as before v8. */
export function unfiltered(store: EventStore): EventStore {
  (store as { archiveSegmentsWithout?: unknown }).archiveSegmentsWithout = undefined;
  return store;
}

export async function streams(store: EventStore, nodes: readonly string[]): Promise<Map<string, readonly Recorded[]>> {
  const out = new Map<string, readonly Recorded[]>();
  try {
    for (const n of nodes) out.set(n, await store.readStream(streamOf(n)));
  } finally {
    await store.close();
  }
  return out;
}
