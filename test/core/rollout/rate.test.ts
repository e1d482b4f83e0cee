import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { allowance, allowedAt } from '../../../src/core/rollout/index.ts';
import type { Meter } from '../../../src/core/rollout/index.ts';

// docs/design.md §8 "Rate": the allowance grows with time, and allowedAt is the first moment it
// reaches a count, so the driver waits exactly as long as the meter says.

const meter: fc.Arbitrary<Meter> = fc.oneof(
  fc.integer({ min: 1, max: 600 }).map((perMinute) => ({ kind: 'rate' as const, perMinute })),
  fc
    .record({
      base: fc.integer({ min: 1, max: 60 }),
      factor: fc.integer({ min: 1, max: 4 }),
      extra: fc.integer({ min: 0, max: 300 }),
      everyMs: fc.integer({ min: 1_000, max: 120_000 }),
    })
    .map(({ base, factor, extra, everyMs }) => ({ kind: 'ramp' as const, base, factor, cap: base + extra, everyMs })),
);

test('allowedAt(n) is the first millisecond the allowance reaches n, and the allowance never falls', () => {
  fc.assert(
    fc.property(meter, fc.integer({ min: 1, max: 500 }), (m, n) => {
      const at = allowedAt(m, n);
      assert.ok(allowance(m, at) >= n, `allowance ${allowance(m, at)} at ${at} for ${n}`);
      if (at > 0) assert.ok(allowance(m, at - 1) < n, `already ${allowance(m, at - 1)} at ${at - 1} for ${n}`);
      assert.ok(allowance(m, at + 60_000) >= allowance(m, at));
    }),
  );
});

test('a steady rate: one at once, then perMinute a minute', () => {
  const m: Meter = { kind: 'rate', perMinute: 6 };
  assert.deepEqual(
    [0, 9_999, 10_000, 60_000].map((t) => allowance(m, t)),
    [1, 1, 2, 7],
  );
});
