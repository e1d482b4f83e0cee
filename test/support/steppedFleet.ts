import type { At } from '../../projections/index.ts';
import { makeAliveSeen, makeNodeHeard, makeNodeSilent, streamOf } from '../../src/core/events/index.ts';
import type { ConvergeEvent, WithId } from '../../src/core/events/index.ts';
import { stateAsOf } from '../../src/readModel/queries.ts';
import type { StateAsOf } from '../../src/readModel/queries.ts';
import type { EventStore } from '../../src/store/port.ts';
import { prng } from './prng.ts';

// A fleet whose engine clock steps back now and then, and the reads "as of" a moment over it, for
// the tests of the archive segments' time ranges (docs/store.md "Segment time ranges") on both stores.

export const dayMs = 86_400_000;

export type Fleet = { nodes: string[]; head: bigint; start: number; end: number };

/**
 * 20 nodes over 120 days to about a week ago: alives, silences and comebacks interleaved at random;
 * with `stepBack`, now and then the clock steps back by up to two days (an engine's clock, or a
 * second engine appending).
 */
export async function randomFleet(store: EventStore, seed: number, stepBack: boolean): Promise<Fleet> {
  const rand = prng(seed);
  const nodes = Array.from({ length: 20 }, (_, i) => `n${i}`);
  const start = Date.now() - 120 * dayMs;
  let t = start;
  let end = t;
  for (let i = 0; i < 800; i++) {
    t += 60_000 + Math.floor(rand() * 3 * 3_600_000);
    if (stepBack && rand() < 0.02) t -= Math.floor(rand() * 2 * dayMs);
    end = Math.max(end, t);
    const node = nodes[Math.floor(rand() * rand() * nodes.length)]!;
    const k = rand();
    const e: WithId<ConvergeEvent> =
      k < 0.7 ? makeAliveSeen({ node }, t) : k < 0.85 ? makeNodeSilent(node, t - 90_000, t, 60_000) : makeNodeHeard(node, t, t - 600_000);
    await store.append([{ stream: streamOf(node), expected: 'any', events: [e] }]);
  }
  const head = (await store.headPosition())!;
  await store.close();
  return { nodes, head, start, end };
}

/** The same store with no time ranges in its manifest: every segment its filter allows is opened. */
export function untimed(store: EventStore): EventStore {
  const manifest = store.archiveManifest!.bind(store);
  store.archiveManifest = async () => {
    const m = await manifest();
    return { ...m, segments: m.segments.map(({ minTime: _a, maxTime: _b, ...s }) => s) };
  };
  return store;
}

/** Moments to read as of: times across the history and past both ends, positions too. */
export function moments(f: Fleet, rand: () => number): At[] {
  const times = [f.start - dayMs, f.end + dayMs, ...Array.from({ length: 16 }, () => f.start + rand() * (f.end - f.start))];
  const positions = Array.from({ length: 6 }, () => BigInt(Math.floor(rand() * Number(f.head))));
  return [
    ...times.map((time): At => ({ kind: 'time', time, iso: new Date(time).toISOString() })),
    ...positions.map((position): At => ({ kind: 'position', position })),
  ];
}

export async function answers(store: EventStore, nodes: readonly string[], at: readonly At[]): Promise<(StateAsOf | string)[]> {
  const out: (StateAsOf | string)[] = [];
  try {
    for (const m of at)
      for (const n of nodes) {
        try {
          out.push(await stateAsOf(store, n, m, 60_000));
        } catch (err) {
          out.push((err as Error).message);
        }
      }
  } finally {
    await store.close();
  }
  return out;
}
