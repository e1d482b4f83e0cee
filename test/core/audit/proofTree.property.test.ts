import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { consistencyProof, inclusionProof, leafHash, rootOfLeafHashes } from '../../../src/core/audit/merkle.ts';
import type { Hash } from '../../../src/core/audit/merkle.ts';
import { createProofTree } from '../../../src/core/audit/proofTree.ts';

// proofTree.ts's proofs over a prefix of the leaves must be merkle.ts's (the definition) over that
// prefix, for every size, index and pair of sizes: an evidence bundle is checked with merkle.ts.

const hashesOf = (n: number): Hash[] => Array.from({ length: n }, (_, i) => leafHash(Buffer.from(`event ${i}`)));
const hex = (hs: readonly Hash[]): string[] => hs.map((h) => h.toString('hex'));

test('property: roots, inclusion and consistency proofs equal merkle.ts over every prefix', () => {
  fc.assert(
    fc.property(
      fc
        .integer({ min: 1, max: 140 })
        .chain((total) => fc.tuple(fc.constant(total), fc.integer({ min: 1, max: total }), fc.nat(), fc.nat())),
      ([total, size, i, m]) => {
        const all = hashesOf(total);
        const tree = createProofTree(all);
        const prefix = all.slice(0, size);
        assert.equal(tree.root(size).toString('hex'), rootOfLeafHashes(prefix).toString('hex'));
        const index = i % size;
        assert.deepEqual(hex(tree.inclusion(index, size)), hex(inclusionProof(prefix, index)));
        const first = m % (size + 1);
        assert.deepEqual(hex(tree.consistency(first, size)), hex(consistencyProof(prefix, first)));
      },
    ),
    { numRuns: 400 },
  );
});

test('a size past the leaves or an index past the size is refused', () => {
  const tree = createProofTree(hashesOf(5));
  assert.throws(() => tree.root(6), RangeError);
  assert.throws(() => tree.inclusion(5, 5), RangeError);
  assert.throws(() => tree.consistency(4, 6), RangeError);
});
