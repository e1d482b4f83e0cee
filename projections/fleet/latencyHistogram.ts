// Convergence latencies of a fleet as counts per bucket, so the fleet summary's percentiles are
// kept up to date as events fold, by adding and removing samples, and answered without sorting
// every sample (GET /v1/fleet sorted up to 16 samples of each of 100,000 nodes per request, most
// of its 0.5 s). Exact below 2,048 ms; above, each power of two is split into 1,024
// buckets and a value is read back as the low edge of its bucket: within 0.1 % of the sample.

const exactBelow = 2048;
const subBuckets = 1024;
const maxExponent = 45; // 2^45 ms is over a thousand years: anything longer lands in the last bucket
const bucketCount = exactBelow + (maxExponent - 11 + 1) * subBuckets;
const blockSize = 1024;

/** The bucket of a latency in whole milliseconds (negative: 0). */
export function latencyBucket(ms: number): number {
  const v = ms <= 0 ? 0 : Math.floor(ms);
  if (v < exactBelow) return v;
  // Below 2^31 ms (24 days) the exponent is the highest set bit, found with integer instructions:
  // a restore adds each node's recent latencies one by one, and Math.log2 was most of their cost.
  if (v < 0x8000_0000) {
    const high = 31 - Math.clz32(v);
    return exactBelow + (high - 11) * subBuckets + ((v >>> (high - 10)) - subBuckets);
  }
  const e = Math.min(maxExponent, Math.floor(Math.log2(v)));
  if (e >= maxExponent && v >= 2 ** (maxExponent + 1)) return bucketCount - 1;
  const sub = Math.floor(v / 2 ** (e - 10)) - subBuckets;
  return exactBelow + (e - 11) * subBuckets + Math.min(subBuckets - 1, Math.max(0, sub));
}

/** The value a bucket reads back as: the sample itself below 2,048 ms, else its low edge. */
export function bucketValue(bucket: number): number {
  if (bucket < exactBelow) return bucket;
  const k = bucket - exactBelow;
  const e = 11 + Math.floor(k / subBuckets);
  return (subBuckets + (k % subBuckets)) * 2 ** (e - 10);
}

export type LatencyHistogram = Readonly<{
  add: (ms: number) => void;
  remove: (ms: number) => void;
  /** add, or remove (by -1), each of a list in one loop: a node's recent latencies, 16 once its history is full. */
  changeAll: (ms: ArrayLike<number>, by: 1 | -1) => void;
  count: () => number;
  /** Nearest-rank percentile (p in 0–100), as `percentile` of fleet.ts over the sorted samples; null when empty. */
  percentile: (p: number) => number | null;
  max: () => number | null;
}>;

export function createLatencyHistogram(): LatencyHistogram {
  const counts = new Int32Array(bucketCount);
  // Sums per block of buckets, so a percentile walks ~70 blocks and one block, not 37,000 buckets.
  const blocks = new Int32Array(Math.ceil(bucketCount / blockSize));
  let n = 0;
  const change = (ms: number, by: number): void => {
    const b = latencyBucket(ms);
    counts[b] = counts[b]! + by;
    const k = Math.floor(b / blockSize);
    blocks[k] = blocks[k]! + by;
    n += by;
  };
  const changeAll = (ms: ArrayLike<number>, by: number): void => {
    for (let i = 0; i < ms.length; i++) {
      const b = latencyBucket(ms[i]!);
      counts[b] = counts[b]! + by;
      const k = Math.floor(b / blockSize);
      blocks[k] = blocks[k]! + by;
    }
    n += by * ms.length;
  };
  /** The bucket holding the sample of 1-based rank `rank`. */
  const bucketOfRank = (rank: number): number => {
    let seen = 0;
    let k = 0;
    while (k < blocks.length && seen + blocks[k]! < rank) seen += blocks[k++]!;
    let b = k * blockSize;
    while (b < bucketCount && seen + counts[b]! < rank) seen += counts[b++]!;
    return Math.min(b, bucketCount - 1);
  };
  return {
    add: (ms) => change(ms, 1),
    remove: (ms) => change(ms, -1),
    changeAll,
    count: () => n,
    percentile: (p) => {
      if (n === 0) return null;
      const rank = Math.min(n, Math.max(1, Math.ceil((p / 100) * n)));
      return bucketValue(bucketOfRank(rank));
    },
    max: () => (n === 0 ? null : bucketValue(bucketOfRank(n))),
  };
}
