import * as crypto from 'node:crypto';

// The Merkle Tree Hash of RFC 9162 §2.1 over the event log (docs/audit.md), its inclusion and
// consistency proofs, and their verification. Tree sizes and indexes are numbers: every step below
// divides instead of shifting, because JavaScript's bit operators cut numbers to 32 bits and a log
// may outgrow that; a number stays exact up to 2^53 leaves.

export type Hash = Buffer;

/**
 * SHA-256 of `bytes` in one call. Node's one-shot hash (20.12+) makes no Hash object and crosses
 * into C++ once; each createHash, update and digest crosses on its own, and at two or three hashes
 * per event those crossings, not the hashing, were most of an append's and a verify's cost. The
 * digest comes back as a latin1 ('binary') string: a 'buffer' digest is an ArrayBuffer of its own
 * per hash, and Buffer.from(digest, 'latin1') a second crossing; 32 characters copied in a loop
 * into a slab of our own cost less than either (docs/audit.md#what-the-tree-costs-an-append).
 */
export const sha256 = (bytes: Uint8Array): Hash => digestBytes(sha256Latin1(bytes));

/** SHA-256 of `bytes` written into `out` at `at`: for a hash kept beside others, or used once and dropped. */
export function sha256Into(bytes: Uint8Array, out: Uint8Array, at = 0): void {
  const digest = sha256Latin1(bytes);
  for (let i = 0; i < 32; i++) out[at + i] = digest.charCodeAt(i);
}

/** SHA-256 of `bytes` as a latin1 string of 32 characters, one a byte. */
const sha256Latin1: (bytes: Uint8Array) => string =
  typeof crypto.hash === 'function'
    ? (bytes) => crypto.hash('sha256', bytes, 'binary')
    : (bytes) => crypto.createHash('sha256').update(bytes).digest('binary');

/** Hashes handed out per slab: a slab is freed once none of its hashes is held. */
const slabHashes = 512;
let slab = Buffer.allocUnsafe(32 * slabHashes);
let slabAt = 0;

/** A latin1 digest string's 32 bytes, as a Buffer of its own 32 bytes in the current slab. */
function digestBytes(digest: string): Hash {
  if (slabAt === slab.length) {
    slab = Buffer.allocUnsafe(32 * slabHashes);
    slabAt = 0;
  }
  const out = slab.subarray(slabAt, slabAt + 32);
  slabAt += 32;
  for (let i = 0; i < 32; i++) out[i] = digest.charCodeAt(i);
  return out;
}

/** MTH({}) = SHA-256 of the empty string: the root of a tree of no leaves. */
export const EMPTY_ROOT: Hash = crypto.createHash('sha256').digest();

/** SHA-256(0x00 || leaf): a leaf's hash; the prefix keeps a leaf from passing for an inner node. */
export const leafHash = (leaf: Uint8Array): Hash => {
  const prefixed = Buffer.allocUnsafe(1 + leaf.length);
  prefixed[0] = 0x00;
  prefixed.set(leaf, 1);
  return sha256(prefixed);
};

const NODE_PREFIX = Buffer.from([0x01]);
// One buffer for every inner node's input: hashing is synchronous, so no two calls share it at once.
const nodeInput = Buffer.alloc(65);

/** SHA-256(0x01 || left || right). */
export const nodeHash = (left: Uint8Array, right: Uint8Array): Hash => {
  if (left.length !== 32 || right.length !== 32) return crypto.createHash('sha256').update(NODE_PREFIX).update(left).update(right).digest();
  nodeInput[0] = 0x01;
  nodeInput.set(left, 1);
  nodeInput.set(right, 33);
  return sha256(nodeInput);
};

const isOdd = (x: number): boolean => x % 2 === 1;
const half = (x: number): number => Math.floor(x / 2);
const isPowerOfTwo = (x: number): boolean => x > 0 && largestPowerOfTwoBelow(x * 2) === x;
const isSize = (x: number): boolean => Number.isSafeInteger(x) && x >= 0;
const isHash = (h: Uint8Array): boolean => h.length === 32;

/** The k of RFC 9162 §2.1.1: the largest power of two smaller than n (n > 1). */
export function largestPowerOfTwoBelow(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/** MTH over leaf hashes [from, to): the recursion of §2.1.1, starting from the leaves' hashes. */
function rangeRoot(hashes: readonly Hash[], from: number, to: number): Hash {
  const n = to - from;
  if (n === 0) return EMPTY_ROOT;
  if (n === 1) return hashes[from]!;
  const k = largestPowerOfTwoBelow(n);
  return nodeHash(rangeRoot(hashes, from, from + k), rangeRoot(hashes, from + k, to));
}

/** MTH(D[n]) of leaves given by their hashes (`leafHash` of each). */
export const rootOfLeafHashes = (hashes: readonly Hash[]): Hash => rangeRoot(hashes, 0, hashes.length);

/** MTH(D[n]) of the leaves themselves. */
export const merkleRoot = (leaves: readonly Uint8Array[]): Hash => rootOfLeafHashes(leaves.map(leafHash));

/**
 * Appends leaves one at a time and gives the root of the leaves so far, holding only the roots of
 * the perfect subtrees that make up the tree (one per set bit of the size: a "compact range"), so
 * its memory is O(log n). A store can keep `compactRange()` beside its head and resume from it.
 */
export type TreeBuilder = {
  /** Leaves appended so far. */
  readonly size: number;
  append(leaf: Uint8Array): void;
  /** The 32 bytes of `hash` from `at` (0) are the next leaf's hash; they are copied. */
  appendLeafHash(hash: Uint8Array, at?: number): void;
  /** MTH of the leaves so far: EMPTY_ROOT before the first. */
  root(): Hash;
  /** The subtree roots, largest (leftmost) first: enough to resume with `createTreeBuilder`. */
  compactRange(): CompactRange;
  /** compactRange()'s hashes one after the other in one Buffer of their own (32 bytes each): the frontier a store keeps. */
  frontier(): Buffer;
};

export type CompactRange = Readonly<{ size: number; hashes: readonly Hash[] }>;

export function createTreeBuilder(from: CompactRange = { size: 0, hashes: [] }): TreeBuilder {
  if (!isSize(from.size)) throw new RangeError(`a tree size is a non-negative safe integer, got ${from.size}`);
  let size = from.size;
  const bits: number[] = [];
  for (let i = 0, rest = size; rest > 0; i++, rest = half(rest)) if (isOdd(rest)) bits.push(i);
  if (bits.length !== from.hashes.length) {
    throw new RangeError(`a compact range of size ${size} holds ${bits.length} hashes, got ${from.hashes.length}`);
  }
  // Level i has 65 bytes of its own, laid out as an inner node's input: 0x01 ‖ left ‖ right. While
  // bit i of size is set, `left` holds the root of the perfect subtree of 2^i leaves; a carry that
  // climbs to a set level is written into its `right`, so the slot is hashed as it stands and each
  // digest is written straight where it goes next. No bytes move between levels and no Buffer is
  // made per inner node: appending makes about one inner node per leaf, on every append and in
  // verify's walk (docs/audit.md#what-the-tree-costs-an-append).
  const work = Buffer.alloc(slot * maxLevels);
  for (let level = 0; level < maxLevels; level++) work[slot * level] = 0x01;
  // A level's view is made when a carry first reaches it: a store makes a builder on every rollback
  // and every reload, and 54 views up front were most of that (docs/audit.md#what-the-tree-costs-an-append).
  const inputs: (Buffer | undefined)[] = new Array<Buffer | undefined>(maxLevels);
  const input = (level: number): Buffer => (inputs[level] ??= work.subarray(slot * level, slot * (level + 1)));
  bits.reverse().forEach((level, i) => {
    const hash = from.hashes[i]!;
    if (!isHash(hash)) throw new RangeError(`a compact range holds hashes of 32 bytes, got ${hash.length}`);
    work.set(hash, slot * level + 1);
  });

  const appendLeafHash = (hash: Uint8Array, at = 0): void => {
    if (at < 0 || at + 32 > hash.length) throw new RangeError(`a leaf hash is 32 bytes, got ${hash.length - at}`);
    // Adding one to the size carries through its low set bits: each carry merges two equal subtrees.
    let rest = size;
    let level = 0;
    let to = isOdd(rest) ? 33 : 1;
    for (let b = 0; b < 32; b++) work[to + b] = hash[at + b]!;
    while (isOdd(rest)) {
      const digest = sha256Latin1(input(level));
      rest = (rest - 1) / 2;
      level += 1;
      to = slot * level + (isOdd(rest) ? 33 : 1);
      for (let b = 0; b < 32; b++) work[to + b] = digest.charCodeAt(b);
    }
    size += 1;
  };
  /** The set levels' roots, smallest subtree first. */
  const subtrees = (): Hash[] => {
    const out: Hash[] = [];
    for (let level = 0, rest = size; rest > 0; level++, rest = half(rest)) {
      if (isOdd(rest)) out.push(Buffer.from(work.subarray(slot * level + 1, slot * level + 33)));
    }
    return out;
  };
  return {
    get size() {
      return size;
    },
    append: (leaf) => appendLeafHash(leafHash(leaf)),
    appendLeafHash,
    root() {
      // The split at the largest power of two puts the biggest subtree left: fold from the smallest,
      // the fold so far kept as the right half of one inner node's input, each larger root copied
      // in as its left, a byte at a time (Buffer#copy checks its arguments on every call). A store
      // asks for the root on every append call (docs/audit.md#what-the-tree-costs-an-append).
      if (size === 0) return EMPTY_ROOT;
      let folded = false;
      for (let level = 0, rest = size; rest > 0; level++, rest = half(rest)) {
        if (!isOdd(rest)) continue;
        const from = slot * level + 1;
        if (!folded) {
          for (let b = 0; b < 32; b++) rootInput[33 + b] = work[from + b]!;
          folded = true;
          continue;
        }
        for (let b = 0; b < 32; b++) rootInput[1 + b] = work[from + b]!;
        const digest = sha256Latin1(rootInput);
        for (let b = 0; b < 32; b++) rootInput[33 + b] = digest.charCodeAt(b);
      }
      const root = Buffer.allocUnsafe(32);
      for (let b = 0; b < 32; b++) root[b] = rootInput[33 + b]!;
      return root;
    },
    compactRange: () => ({ size, hashes: subtrees().reverse() }),
    frontier() {
      let count = 0;
      for (let rest = size; rest > 0; rest = half(rest)) if (isOdd(rest)) count++;
      const out = Buffer.allocUnsafe(32 * count);
      for (let level = 0, rest = size; rest > 0; level++, rest = half(rest)) {
        if (!isOdd(rest)) continue;
        const to = 32 * --count;
        for (let b = 0; b < 32; b++) out[to + b] = work[slot * level + 1 + b]!;
      }
      return out;
    },
  };
}

/** The root's fold: 0x01 ‖ a larger subtree's root ‖ the fold so far. Shared: hashing is synchronous. */
const rootInput = Buffer.alloc(65);
rootInput[0] = 0x01;

/** Levels a tree of up to 2^53 leaves can have set, and the bytes each keeps (0x01 ‖ left ‖ right). */
const maxLevels = 54;
const slot = 65;

/** PATH(m, D[n]) of §2.1.3.1: the inclusion proof of leaf `index` in the tree of these leaf hashes. */
export function inclusionProof(hashes: readonly Hash[], index: number): Hash[] {
  if (!Number.isSafeInteger(index) || index < 0 || index >= hashes.length) {
    throw new RangeError(`leaf index ${index} is not in a tree of ${hashes.length}`);
  }
  const path: Hash[] = [];
  // Walk down from the root; the siblings come out root first, and the proof lists them leaf first.
  let from = 0;
  let to = hashes.length;
  while (to - from > 1) {
    const k = largestPowerOfTwoBelow(to - from);
    if (index < from + k) {
      path.push(rangeRoot(hashes, from + k, to));
      to = from + k;
    } else {
      path.push(rangeRoot(hashes, from, from + k));
      from += k;
    }
  }
  return path.reverse();
}

/** PROOF(m, D[n]) of §2.1.4.1: that the tree of the first m leaf hashes is a prefix of the tree of all n. */
export function consistencyProof(hashes: readonly Hash[], m: number): Hash[] {
  const n = hashes.length;
  if (!Number.isSafeInteger(m) || m < 0 || m > n) throw new RangeError(`size ${m} is not a prefix of a tree of ${n}`);
  // An empty tree is a prefix of any tree, and a tree of itself: both need no hash.
  if (m === 0 || m === n) return [];
  return subproof(hashes, m, 0, n, true);
}

/** SUBPROOF(m, D[from:to], b): `known` says whether the verifier holds MTH(D[from:from+m]). */
function subproof(hashes: readonly Hash[], m: number, from: number, to: number, known: boolean): Hash[] {
  if (m === to - from) return known ? [] : [rangeRoot(hashes, from, to)];
  const k = largestPowerOfTwoBelow(to - from);
  if (m <= k) return [...subproof(hashes, m, from, from + k, known), rangeRoot(hashes, from + k, to)];
  return [...subproof(hashes, m - k, from + k, to, false), rangeRoot(hashes, from, from + k)];
}

/** §2.1.3.2: does `path` prove the leaf hash at `index` in the tree of `size` whose root is `root`? */
export function verifyInclusion(hash: Hash, index: number, size: number, path: readonly Hash[], root: Hash): boolean {
  if (!isSize(index) || !isSize(size) || index >= size) return false;
  if (!isHash(hash) || !isHash(root) || !path.every(isHash)) return false;
  let fn = index;
  let sn = size - 1;
  let r = hash;
  for (const p of path) {
    if (sn === 0) return false;
    if (isOdd(fn) || fn === sn) {
      r = nodeHash(p, r);
      // A right edge with no sibling at this level: climb until this node is a right child again.
      while (!isOdd(fn) && fn !== 0) {
        fn = half(fn);
        sn = half(sn);
      }
    } else {
      r = nodeHash(r, p);
    }
    fn = half(fn);
    sn = half(sn);
  }
  return sn === 0 && r.equals(root);
}

/** §2.1.4.2: does `path` prove that the tree (`first`, `firstRoot`) is a prefix of (`second`, `secondRoot`)? */
export function verifyConsistency(first: number, second: number, firstRoot: Hash, secondRoot: Hash, path: readonly Hash[]): boolean {
  if (!isSize(first) || !isSize(second) || first > second) return false;
  if (!isHash(firstRoot) || !isHash(secondRoot) || !path.every(isHash)) return false;
  if (first === 0) return path.length === 0 && firstRoot.equals(EMPTY_ROOT);
  if (first === second) return path.length === 0 && firstRoot.equals(secondRoot);
  if (path.length === 0) return false;
  // The old tree's root is its own left subtree when its size is a power of two: the proof omits it.
  const steps = isPowerOfTwo(first) ? [firstRoot, ...path] : [...path];
  let fn = first - 1;
  let sn = second - 1;
  while (isOdd(fn)) {
    fn = half(fn);
    sn = half(sn);
  }
  let fr = steps[0]!;
  let sr = steps[0]!;
  for (const c of steps.slice(1)) {
    if (sn === 0) return false;
    if (isOdd(fn) || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      while (!isOdd(fn) && fn !== 0) {
        fn = half(fn);
        sn = half(sn);
      }
    } else {
      sr = nodeHash(sr, c);
    }
    fn = half(fn);
    sn = half(sn);
  }
  return sn === 0 && fr.equals(firstRoot) && sr.equals(secondRoot);
}
