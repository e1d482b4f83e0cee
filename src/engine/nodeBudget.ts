// A per-node budget for reports: one token bucket per sender, so one node's
// flood cannot take the engine's time from the others. mesh.reports is one FIFO queue shared by
// every node (docs/design.md §1), so a backlog behind a flood delays every node's reports alike; what
// keeps the queue short is disposing of a flood faster than it arrives, and a report over budget
// costs only a dead-letter copy (no parse, no store append, no fold). Nodes report rarely (a node
// "applies something rarely", wire.go), so the defaults leave real nodes far below the budget.

export type NodeBudgetOptions = Readonly<{
  /** Units per second a node may sustain (a message costs one unit per started 4 KiB: costOf). */
  ratePerSecond: number;
  /** Units a node may spend at once after a quiet spell. */
  burst: number;
  /** Clock in ms (tests inject one). */
  now?: () => number;
}>;

/**
 * What a message costs: one unit per started 4 KiB of body. Parsing, storing, reading back and
 * folding are all linear in the bytes, and a 130 KB report cost ~37 ms of engine time where a
 * routine one costs ~20 µs: counted by messages, 20 wide reports a second filled the
 * engine; counted by size, a node at its budget moves at most rate × 4 KiB a second.
 */
export const costOf = (bytes: number): number => Math.max(1, Math.ceil(bytes / 4096));

export type NodeBudget = Readonly<{
  /** Spend `cost` units of `node`'s budget; false (and nothing spent) when it has fewer left. */
  take: (node: string, cost?: number) => boolean;
  /** Nodes with a bucket in memory (buckets refilled to full are forgotten). */
  size: () => number;
}>;

type Bucket = { tokens: number; at: number };

/** Buckets a take looks at while a sweep is under way. */
export const sweepPerTake = 256;

export function createNodeBudget(options: NodeBudgetOptions): NodeBudget {
  const rate = options.ratePerSecond / 1000;
  const burst = Math.max(1, options.burst);
  const now = options.now ?? Date.now;
  const buckets = new Map<string, Bucket>();
  /** Sweep at most this often; a bucket full again can be forgotten and rebuilt full on demand. */
  const refillMs = burst / rate;
  let sweptAt = now();
  /** The sweep under way: a few buckets a take, as a pass over 100,000 held one turn for ms. */
  let sweeping: Iterator<[string, Bucket]> | null = null;

  function sweep(t: number): void {
    if (sweeping === null) {
      if (t - sweptAt < refillMs) return;
      sweptAt = t;
      sweeping = buckets.entries();
    }
    // Forgetting a full bucket loses nothing whenever it is looked at, so a pass may span many takes.
    for (let i = 0; i < sweepPerTake; i++) {
      const next = sweeping.next();
      if (next.done === true) {
        sweeping = null;
        return;
      }
      const [node, b] = next.value;
      if (b.tokens + (t - b.at) * rate >= burst) buckets.delete(node);
    }
  }

  return {
    take(node, cost = 1) {
      const t = now();
      sweep(t);
      let b = buckets.get(node);
      if (b === undefined) buckets.set(node, (b = { tokens: burst, at: t }));
      else {
        b.tokens = Math.min(burst, b.tokens + (t - b.at) * rate);
        b.at = t;
      }
      // A message dearer than the whole burst still passes when the bucket is full, or a node
      // could never send one; the bucket then runs into debt and refills from below zero.
      if (b.tokens < Math.min(cost, burst)) return false;
      b.tokens -= cost;
      return true;
    },
    size: () => buckets.size,
  };
}
