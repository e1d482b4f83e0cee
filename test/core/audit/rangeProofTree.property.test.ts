import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { BlockSummaryError } from '../../../src/core/audit/blockProofTree.ts';
import { leafHash } from '../../../src/core/audit/merkle.ts';
import type { Hash } from '../../../src/core/audit/merkle.ts';
import { createProofTree } from '../../../src/core/audit/proofTree.ts';
import { createRangeProofTree, rangePieces, rangeRoots } from '../../../src/core/audit/rangeProofTree.ts';
import type { LeafSpan, RangeSummary } from '../../../src/core/audit/rangeProofTree.ts';

// rangeProofTree.ts must give createProofTree's roots and proofs (the definition) from the
// summaries of the ranges not read and the leaves of those read, on any tiling of the tree into
// ranges; it must refuse to answer from a leaf it was not given, and a summary that disagrees with
// the leaves of its range.

const hashesOf = (n: number): Hash[] => Array.from({ length: n }, (_, i) => leafHash(Buffer.from(`event ${i}`)));
const hex = (hs: readonly Hash[]): string[] => hs.map((h) => h.toString('hex'));

/** Cut [0, size) at `cuts`; the ranges picked by `read`, and the last (the hot tail), are read. */
function world(size: number, cuts: readonly number[], read: readonly boolean[]) {
  const all = hashesOf(size);
  const ends = [...new Set(cuts.map((c) => c % size))].filter((c) => c > 0).sort((a, b) => a - b);
  const bounds = [0, ...ends, size];
  const ranges: RangeSummary[] = [];
  const spans: LeafSpan[] = [];
  for (let i = 0; i + 1 < bounds.length; i++) {
    const [first, end] = [bounds[i]!, bounds[i + 1]!];
    const last = i + 2 === bounds.length;
    if (!last) ranges.push({ first, end, roots: rangeRoots(first, all.slice(first, end)) });
    if (last || read[i] === true) spans.push({ first, hashes: all.slice(first, end) });
  }
  return { all, ranges, spans };
}

test('rangePieces: maximal aligned subtrees that tile the range', () => {
  assert.deepEqual(rangePieces(0, 7), [
    [0, 2],
    [4, 1],
    [6, 0],
  ]);
  assert.deepEqual(rangePieces(5, 16), [
    [5, 0],
    [6, 1],
    [8, 3],
  ]);
  assert.deepEqual(rangePieces(3, 3), []);
});

test('property: from range summaries and the spans read, the roots and proofs of the whole tree', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 260 }),
      fc.array(fc.nat(), { maxLength: 8 }),
      fc.array(fc.boolean(), { maxLength: 9 }),
      fc.nat(),
      (size, cuts, read, m) => {
        const { all, ranges, spans } = world(size, cuts, read);
        const whole = createProofTree(all);
        const tree = createRangeProofTree(size, ranges, spans);
        assert.equal(tree.root(size).toString('hex'), whole.root(size).toString('hex'));
        const inRead = (i: number): boolean => spans.some((s) => s.first <= i && i < s.first + s.hashes.length);
        for (let i = 0; i < size; i++) {
          if (inRead(i)) assert.deepEqual(hex(tree.inclusion(i, size)), hex(whole.inclusion(i, size)));
        }
        // A smaller tree that ends at a range's end or inside a span read: its root and its consistency with the whole.
        const first = m % (size + 1);
        if (first === 0 || ranges.some((r) => r.end === first) || inRead(first - 1)) {
          assert.equal(tree.root(first).toString('hex'), whole.root(first).toString('hex'));
          assert.deepEqual(hex(tree.consistency(first, size)), hex(whole.consistency(first, size)));
        }
      },
    ),
    { numRuns: 300 },
  );
});

test('a leaf not read cannot be proven; a summary that disagrees with its leaves is refused or changes the root', () => {
  const { all, ranges, spans } = world(100, [30, 61, 80], [false, true, false]);
  const tree = createRangeProofTree(100, ranges, spans);
  // Leaf 10 sits inside [0, 30) = 16 + 8 + 4 + 2: not one of its leaves was read.
  assert.throws(() => tree.inclusion(10, 100), RangeError);
  const badRead = ranges.map((r) => (r.first === 30 ? { ...r, roots: [leafHash(Buffer.from('x')), ...r.roots.slice(1)] } : r));
  assert.throws(() => createRangeProofTree(100, badRead, spans), BlockSummaryError);
  const badUnread = ranges.map((r) => (r.first === 0 ? { ...r, roots: [leafHash(Buffer.from('x')), ...r.roots.slice(1)] } : r));
  assert.notEqual(createRangeProofTree(100, badUnread, spans).root(100).toString('hex'), createProofTree(all).root(100).toString('hex'));
  assert.throws(
    () => createRangeProofTree(100, [{ ...ranges[0]!, roots: ranges[0]!.roots.slice(1) }, ...ranges.slice(1)], spans),
    BlockSummaryError,
  );
});
