import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { bucketValue, createLatencyHistogram, latencyBucket, percentile } from '../../../projections/index.ts';

test('the latency histogram gives the nearest-rank percentiles of its samples: exact below 2,048 ms, within 0.1 % above', () => {
  fc.assert(
    fc.property(
      fc.array(fc.oneof(fc.integer({ min: 0, max: 3_000 }), fc.integer({ min: 0, max: 10 * 86_400_000 })), {
        minLength: 1,
        maxLength: 300,
      }),
      fc.array(fc.nat(), { maxLength: 50 }),
      (samples, removals) => {
        const h = createLatencyHistogram();
        for (const s of samples) h.add(s);
        // Samples removed again (a node's state replaced) leave no trace.
        const kept = [...samples];
        for (const r of removals) {
          if (kept.length <= 1) break;
          const [gone] = kept.splice(r % kept.length, 1);
          h.remove(gone!);
        }
        const sorted = [...kept].sort((a, b) => a - b);
        assert.equal(h.count(), kept.length);
        for (const p of [0, 1, 50, 90, 99, 100]) {
          const exact = percentile(sorted, p)!;
          const got = h.percentile(p)!;
          if (exact < 2048) assert.equal(got, exact, `p${p}`);
          else assert.ok(got <= exact && exact - got <= exact / 1000, `p${p}: ${got} for ${exact}`);
        }
        const max = sorted.at(-1)!;
        assert.ok(h.max()! <= max && max - h.max()! <= max / 1000);
      },
    ),
  );
});

test('every latency reads back as the low edge of its bucket, and buckets are in value order', () => {
  let previous = -1;
  for (const v of [0, 1, 2047, 2048, 2049, 3000, 4095, 4096, 65_535, 1e9, 2 ** 45, 2 ** 50]) {
    const b = latencyBucket(v);
    assert.ok(b >= previous);
    previous = b;
    assert.ok(bucketValue(b) <= v);
  }
  assert.equal(bucketValue(latencyBucket(3000)), 3000);
  assert.equal(latencyBucket(-5), 0);
});

test('a latency falls in the bucket whose range holds it, on both sides of every power of two', () => {
  const holds = (v: number): void => {
    const b = latencyBucket(v);
    assert.ok(bucketValue(b) <= v && v < bucketValue(b + 1), `${v} in bucket ${b}: [${bucketValue(b)}, ${bucketValue(b + 1)})`);
  };
  for (let k = 11; k <= 44; k++) for (const d of [-2, -1, 0, 1, 2]) holds(2 ** k + d);
  fc.assert(fc.property(fc.integer({ min: 2048, max: 2 ** 44 }), holds), { numRuns: 5_000 });
});

test('a list added or removed at once counts as its latencies added or removed one by one', () => {
  const latency = fc.oneof(
    fc.integer({ min: 0, max: 3_000 }),
    fc.integer({ min: 0, max: 2 ** 40 }),
    fc.double({ min: -5, max: 1e9, noNaN: true }),
  );
  fc.assert(
    fc.property(fc.array(fc.array(latency, { maxLength: 16 }), { maxLength: 20 }), fc.array(fc.nat()), (lists, removals) => {
      const one = createLatencyHistogram();
      const all = createLatencyHistogram();
      for (const l of lists) {
        for (const v of l) one.add(v);
        all.changeAll(l, 1);
      }
      for (const r of removals.slice(0, lists.length)) {
        const l = lists[r % lists.length]!;
        for (const v of l) one.remove(v);
        all.changeAll(l, -1);
      }
      assert.equal(all.count(), one.count());
      assert.equal(all.max(), one.max());
      for (let p = 0; p <= 100; p += 5) assert.equal(all.percentile(p), one.percentile(p), `p${p}`);
    }),
  );
});
