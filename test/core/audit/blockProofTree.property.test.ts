import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { BlockSummaryError, createBlockProofTree } from '../../../src/core/audit/blockProofTree.ts';
import { leafHash } from '../../../src/core/audit/merkle.ts';
import type { Hash } from '../../../src/core/audit/merkle.ts';
import { createProofTree } from '../../../src/core/audit/proofTree.ts';

// blockProofTree.ts must give createProofTree's roots and proofs (the definition, itself held to
// merkle.ts) from the roots of the complete blocks and the leaves of the blocks read alone; it must
// refuse to answer from a block it was not given, and refuse a block whose leaves disagree with
// the root that stands for it.

const hashesOf = (n: number): Hash[] => Array.from({ length: n }, (_, i) => leafHash(Buffer.from(`event ${i}`)));
const hex = (hs: readonly Hash[]): string[] => hs.map((h) => h.toString('hex'));

function summary(all: readonly Hash[], level: number, read: ReadonlySet<number>) {
  const span = 2 ** level;
  const complete = Math.floor(all.length / span);
  const whole = createProofTree(all);
  const roots = Array.from({ length: complete }, (_, b) => createProofTree(all.slice(b * span, (b + 1) * span)).root(span));
  // The last, partial block is always read: nothing else stands for it.
  const blocks = new Set([...read].filter((b) => b < complete));
  if (all.length % span !== 0) blocks.add(complete);
  const leaves = new Map([...blocks].map((b) => [b, all.slice(b * span, Math.min(all.length, (b + 1) * span))] as const));
  return { whole, span, complete, roots, leaves, blocks };
}

test('property: from block roots and the blocks read, the roots and proofs of the whole tree', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 300 }),
      fc.integer({ min: 0, max: 5 }),
      fc.array(fc.nat(), { maxLength: 4 }),
      fc.nat(),
      (size, level, picks, m) => {
        const all = hashesOf(size);
        const span = 2 ** level;
        const read = new Set(picks.map((p) => p % Math.ceil(size / span)));
        const s = summary(all, level, read);
        const tree = createBlockProofTree({ size, level, roots: s.roots, leaves: s.leaves });
        assert.equal(tree.root(size).toString('hex'), s.whole.root(size).toString('hex'));
        for (let i = 0; i < size; i++) {
          if (s.blocks.has(Math.floor(i / span)) || span === 1)
            assert.deepEqual(hex(tree.inclusion(i, size)), hex(s.whole.inclusion(i, size)));
          else assert.throws(() => tree.inclusion(i, size), RangeError);
        }
        // A smaller tree ending in a block read (or on a block's end): its root, and its consistency with the whole.
        const first = m % (size + 1);
        if (first % span === 0 || s.blocks.has(Math.floor(first / span))) {
          assert.equal(tree.root(first).toString('hex'), s.whole.root(first).toString('hex'));
          assert.deepEqual(hex(tree.consistency(first, size)), hex(s.whole.consistency(first, size)));
        }
      },
    ),
    { numRuns: 300 },
  );
});

test('a block read whole that disagrees with its summary root is refused; one not read changes the root', () => {
  const all = hashesOf(100);
  const s = summary(all, 3, new Set([2]));
  const roots = s.roots.slice();
  roots[2] = leafHash(Buffer.from('not block 2'));
  assert.throws(() => createBlockProofTree({ size: 100, level: 3, roots, leaves: s.leaves }), BlockSummaryError);
  const other = s.roots.slice();
  other[5] = leafHash(Buffer.from('not block 5'));
  const tree = createBlockProofTree({ size: 100, level: 3, roots: other, leaves: s.leaves });
  // The proofs would not reproduce the signed root: export refuses them (CONVERGE_ERR_EVIDENCE_LOG_CHANGED).
  assert.notEqual(tree.root(100).toString('hex'), s.whole.root(100).toString('hex'));
  assert.throws(() => createBlockProofTree({ size: 100, level: 3, roots: s.roots.slice(1), leaves: s.leaves }), BlockSummaryError);
});
