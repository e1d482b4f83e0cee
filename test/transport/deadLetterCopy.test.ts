import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { deadLetterCopy } from '../../src/transport/deadLetterCopy.ts';

test('a refused body up to the limit is copied whole; a longer one as its prefix, with its size and sha256', () => {
  const small = Buffer.alloc(100, 1);
  assert.deepEqual(deadLetterCopy(small, 100), { body: small, headers: {} });
  const big = Buffer.alloc(101, 2);
  const copy = deadLetterCopy(big, 100);
  assert.ok(copy.body.equals(big.subarray(0, 100)));
  assert.deepEqual(copy.headers, {
    'x-converge-original-size': 101,
    'x-converge-original-sha256': createHash('sha256').update(big).digest('hex'),
  });
});
