import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import fc from 'fast-check';
import {
  EMPTY_ROOT,
  consistencyProof,
  createTreeBuilder,
  inclusionProof,
  leafHash,
  merkleRoot,
  verifyConsistency,
  verifyInclusion,
} from '../../../src/core/audit/merkle.ts';
import type { Hash } from '../../../src/core/audit/merkle.ts';

// The tree of src/core/audit/merkle.ts against RFC 9162 §2.1 written again here as plainly as the
// RFC states it (recursion on byte arrays, the split found by trying powers of two), so the two
// share no code.

const sha256 = (...parts: Uint8Array[]): Buffer => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest();
};

function naiveMth(leaves: readonly Uint8Array[]): Buffer {
  if (leaves.length === 0) return sha256();
  if (leaves.length === 1) return sha256(Uint8Array.of(0), leaves[0]!);
  let k = 1;
  while (k * 2 < leaves.length) k *= 2;
  return sha256(Uint8Array.of(1), naiveMth(leaves.slice(0, k)), naiveMth(leaves.slice(k)));
}

const leavesOf = (n: number): Buffer[] => Array.from({ length: n }, (_, i) => Buffer.from(`event ${i}`));
const hashesOf = (leaves: readonly Uint8Array[]): Hash[] => leaves.map(leafHash);
const flip = (h: Hash, bit = 0): Hash => {
  const out = Buffer.from(h);
  out[bit >> 3]! ^= 1 << (bit & 7);
  return out;
};

test('the empty tree has the SHA-256 of the empty string as its root', () => {
  assert.equal(EMPTY_ROOT.toString('hex'), 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  assert.deepEqual(merkleRoot([]), EMPTY_ROOT);
  assert.deepEqual(createTreeBuilder().root(), EMPTY_ROOT);
});

test('the root of every size up to 70 matches the naive MTH, both built at once and one leaf at a time', () => {
  const leaves = leavesOf(70);
  const builder = createTreeBuilder();
  for (let n = 0; n <= leaves.length; n++) {
    const expected = naiveMth(leaves.slice(0, n));
    assert.deepEqual(merkleRoot(leaves.slice(0, n)), expected, `size ${n}`);
    assert.deepEqual(builder.root(), expected, `builder at size ${n}`);
    assert.equal(builder.size, n);
    if (n < leaves.length) builder.append(leaves[n]!);
  }
});

test('a one-leaf tree is the leaf hash, and a leaf cannot pass for an inner node', () => {
  const [a, b] = leavesOf(2);
  assert.deepEqual(merkleRoot([a!]), sha256(Uint8Array.of(0), a!));
  // The root of [a, b] is the hash of 0x01‖h(a)‖h(b); a single leaf of those 64 bytes hashes with 0x00.
  const inner = Buffer.concat([leafHash(a!), leafHash(b!)]);
  assert.notDeepEqual(merkleRoot([inner]), merkleRoot([a!, b!]));
});

test('the streaming builder equals the naive MTH at every size, from random leaves', () => {
  fc.assert(
    fc.property(fc.array(fc.uint8Array({ maxLength: 40 }), { maxLength: 80 }), (leaves) => {
      const builder = createTreeBuilder();
      for (let n = 1; n <= leaves.length; n++) {
        builder.append(leaves[n - 1]!);
        assert.deepEqual(builder.root(), naiveMth(leaves.slice(0, n)));
      }
    }),
    { numRuns: 200 },
  );
});

test('a builder resumed from a compact range goes on as the one it came from', () => {
  fc.assert(
    fc.property(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 0, max: 40 }), (m, more) => {
      const leaves = leavesOf(m + more);
      const first = createTreeBuilder();
      leaves.slice(0, m).forEach((l) => first.append(l));
      const range = first.compactRange();
      assert.equal(range.hashes.length, m.toString(2).replace(/0/g, '').length, 'one hash per set bit of the size');
      const resumed = createTreeBuilder(range);
      leaves.slice(m).forEach((l) => resumed.append(l));
      assert.deepEqual(resumed.root(), naiveMth(leaves));
    }),
    { numRuns: 200 },
  );
  assert.throws(() => createTreeBuilder({ size: 3, hashes: [EMPTY_ROOT] }), RangeError);
});

test("frontier() is the compact range's hashes in one buffer, and a builder resumed from it goes on as the one it came from", () => {
  fc.assert(
    fc.property(fc.integer({ min: 0, max: 600 }), fc.integer({ min: 0, max: 40 }), (m, more) => {
      const leaves = leavesOf(m + more);
      const first = createTreeBuilder();
      leaves.slice(0, m).forEach((l) => first.append(l));
      const frontier = first.frontier();
      assert.deepEqual(frontier, Buffer.concat(first.compactRange().hashes as Hash[]));
      const hashes = Array.from({ length: frontier.length / 32 }, (_, i) => frontier.subarray(32 * i, 32 * i + 32));
      const resumed = createTreeBuilder({ size: m, hashes });
      leaves.slice(m).forEach((l) => resumed.append(l));
      assert.deepEqual(resumed.root(), naiveMth(leaves));
      // Its own bytes: the builder going on does not change a frontier already handed out.
      assert.deepEqual(
        frontier,
        Buffer.concat(createTreeBuilder({ size: m, hashes: first.compactRange().hashes }).compactRange().hashes as Hash[]),
      );
    }),
    { numRuns: 100 },
  );
});

test('a root handed out keeps its bytes while this builder and others go on and make roots of their own', () => {
  // root() folds in one input shared by every builder: what it returns must be a copy.
  const leaves = leavesOf(300);
  const a = createTreeBuilder();
  const b = createTreeBuilder();
  const kept: [Hash, Buffer][] = [];
  for (let n = 0; n < leaves.length; n++) {
    a.append(leaves[n]!);
    b.append(leaves[leaves.length - 1 - n]!);
    const root = a.root();
    kept.push([root, Buffer.from(root)]);
    b.root();
  }
  for (const [root, copy] of kept) assert.deepEqual(root, copy);
  assert.deepEqual(kept.at(-1)![0], naiveMth(leaves));
});

test('an inclusion proof verifies against the root, and not for another leaf, index, size or root', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 200 }).chain((n) => fc.tuple(fc.constant(n), fc.nat(n - 1), fc.nat(n - 1), fc.nat(255))),
      ([n, index, other, bit]) => {
        const hashes = hashesOf(leavesOf(n));
        const root = naiveMth(leavesOf(n));
        const path = inclusionProof(hashes, index);
        assert.ok(verifyInclusion(hashes[index]!, index, n, path, root));
        assert.ok(!verifyInclusion(flip(hashes[index]!, bit), index, n, path, root), 'another leaf');
        assert.ok(!verifyInclusion(hashes[index]!, index, n, path, flip(root, bit)), 'another root');
        if (other !== index) {
          assert.ok(!verifyInclusion(hashes[index]!, other, n, path, root), 'another index');
          assert.ok(!verifyInclusion(hashes[other]!, index, n, path, root), "another leaf's hash");
        }
        // The size is bound to the root by a signed checkpoint, not by the proof: the same path can hold
        // for another size with the same root. Against the tree that grew by one leaf, it does not.
        assert.ok(!verifyInclusion(hashes[index]!, index, n + 1, path, naiveMth(leavesOf(n + 1))), 'the tree one leaf later');
        assert.ok(!verifyInclusion(hashes[index]!, n, n, path, root), 'an index past the end');
        if (path.length > 0) {
          assert.ok(!verifyInclusion(hashes[index]!, index, n, path.slice(1), root), 'a shorter path');
          assert.ok(!verifyInclusion(hashes[index]!, index, n, [...path.slice(0, -1), flip(path.at(-1)!, bit)], root), 'a changed path');
        }
        assert.ok(!verifyInclusion(hashes[index]!, index, n, [...path, root], root), 'a longer path');
      },
    ),
    { numRuns: 500 },
  );
});

test('a consistency proof verifies for every m ≤ n, and not for a changed root, size or path', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 200 }).chain((n) => fc.tuple(fc.constant(n), fc.nat(n), fc.nat(255))),
      ([n, m, bit]) => {
        const leaves = leavesOf(n);
        const hashes = hashesOf(leaves);
        const oldRoot = naiveMth(leaves.slice(0, m));
        const newRoot = naiveMth(leaves);
        const path = consistencyProof(hashes, m);
        assert.ok(verifyConsistency(m, n, oldRoot, newRoot, path));
        assert.ok(!verifyConsistency(m, n, flip(oldRoot, bit), newRoot, path), 'a changed old root');
        // The empty tree is a prefix of every tree: from size 0 nothing about the new root is proven.
        if (m > 0) assert.ok(!verifyConsistency(m, n, oldRoot, flip(newRoot, bit), path), 'a changed new root');
        assert.ok(!verifyConsistency(m, n + 1, oldRoot, naiveMth(leavesOf(n + 1)), path) || m === 0, 'the tree one leaf later');
        if (m > 0 && m < n) {
          assert.ok(!verifyConsistency(m, n, oldRoot, newRoot, [...path.slice(0, -1), flip(path.at(-1)!, bit)]), 'a changed path');
          assert.ok(!verifyConsistency(m, n, oldRoot, newRoot, path.slice(1)), 'a shorter path');
          assert.ok(!verifyConsistency(m, n, oldRoot, newRoot, []), 'no path');
        }
        if (m > 1) assert.ok(!verifyConsistency(m - 1, n, oldRoot, newRoot, path), 'another old size');
      },
    ),
    { numRuns: 500 },
  );
});

test('a consistency proof does not hold when an event before the old size was changed', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 2, max: 120 }).chain((n) => fc.tuple(fc.constant(n), fc.integer({ min: 1, max: n - 1 }))),
      ([n, m]) => {
        const leaves = leavesOf(n);
        const oldRoot = naiveMth(leaves.slice(0, m));
        // The log rewrote one of the first m events after the old checkpoint was taken.
        const rewritten = [...leaves];
        rewritten[m - 1] = Buffer.from('rewritten');
        const hashes = hashesOf(rewritten);
        assert.ok(!verifyConsistency(m, n, oldRoot, naiveMth(rewritten), consistencyProof(hashes, m)));
      },
    ),
    { numRuns: 300 },
  );
});

test('the edges: empty and equal trees need no proof; malformed input fails rather than throws', () => {
  const leaves = leavesOf(5);
  const root = naiveMth(leaves);
  assert.deepEqual(consistencyProof(hashesOf(leaves), 0), []);
  assert.ok(verifyConsistency(0, 5, EMPTY_ROOT, root, []));
  assert.ok(!verifyConsistency(0, 5, flip(EMPTY_ROOT), root, []));
  assert.ok(verifyConsistency(5, 5, root, root, []));
  assert.ok(!verifyConsistency(5, 5, root, flip(root), []));
  assert.ok(!verifyConsistency(6, 5, root, root, []));
  assert.ok(!verifyInclusion(leafHash(leaves[0]!), 0, 5, [Buffer.alloc(31)], root), 'a short hash');
  assert.ok(!verifyInclusion(leafHash(leaves[0]!), -1, 5, [], root));
  assert.ok(!verifyInclusion(leafHash(leaves[0]!), 0.5, 5, [], root));
  assert.throws(() => inclusionProof(hashesOf(leaves), 5), RangeError);
  assert.throws(() => consistencyProof(hashesOf(leaves), 6), RangeError);
});

test('sizes past 2^32 are worked out without 32-bit bit operations', () => {
  // A right-edge leaf of a tree of 2^32 + 3: the path is the perfect left half, then the two leaves' parent.
  const size = 2 ** 32 + 3;
  const left = sha256(Buffer.from('left half'));
  const [a, b, c] = hashesOf(leavesOf(3));
  const ab = sha256(Uint8Array.of(1), a!, b!);
  const root = sha256(Uint8Array.of(1), left, sha256(Uint8Array.of(1), ab, c!));
  assert.ok(verifyInclusion(c!, size - 1, size, [ab, left], root));
  assert.ok(verifyInclusion(a!, 2 ** 32, size, [b!, c!, left], root));
  assert.ok(!verifyInclusion(a!, 2 ** 32 + 1, size, [b!, c!, left], root));
});
