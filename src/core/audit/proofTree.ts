import { EMPTY_ROOT, largestPowerOfTwoBelow, nodeHash } from './merkle.ts';
import type { Hash } from './merkle.ts';

// Many proofs over one log, equal to merkle.ts's inclusionProof and consistencyProof (those are
// the definition; test/core/audit/proofTree.test.ts holds them equal). Those hash every sibling
// subtree again from its leaves, about n hashes a proof; an evidence bundle (docs/audit.md) asks
// for one proof per event over a log of millions. Here the perfect subtrees are hashed once, level
// by level (n hashes in all), and each proof reads about log2 n of them.

export type ProofTree = Readonly<{
  /** Leaves given. Every size below is at most this. */
  size: number;
  /** MTH of the first `size` leaves. */
  root: (size: number) => Hash;
  /** PATH(index, D[size]). */
  inclusion: (index: number, size: number) => Hash[];
  /** PROOF(m, D[n]). */
  consistency: (m: number, n: number) => Hash[];
}>;

export function createProofTree(hashes: readonly Hash[]): ProofTree {
  const levels = perfectLevels(hashes);
  return proofTreeOver(hashes.length, (level, index) => levels[level]![index]!);
}

/** levels[j][i]: the root of the perfect subtree of `hashes` [i·2^j, (i+1)·2^j); n hashes in all. */
export function perfectLevels(hashes: readonly Hash[]): (readonly Hash[])[] {
  const levels: (readonly Hash[])[] = [hashes];
  for (let below = hashes; below.length > 1;) {
    const up: Hash[] = [];
    for (let i = 0; i + 1 < below.length; i += 2) up.push(nodeHash(below[i]!, below[i + 1]!));
    levels.push(up);
    below = up;
  }
  return levels;
}

/**
 * The proofs of a tree of `size` leaves, given the root of each perfect, aligned subtree it is
 * asked for: `perfect(j, i)` is MTH of leaves [i·2^j, (i+1)·2^j). Every range a proof or a root
 * names splits into such subtrees (RFC 9162 §2.1.1); the last, partial one is split further.
 */
export function proofTreeOver(size: number, perfect: (level: number, index: number) => Hash): ProofTree {
  /** MTH(D[from:to]): a perfect, aligned range is read; any other splits as §2.1.1 does. */
  function rangeRoot(from: number, to: number): Hash {
    const n = to - from;
    if (n === 0) return EMPTY_ROOT;
    let level = 0;
    while (2 ** level < n) level++;
    if (2 ** level === n && from % n === 0) return perfect(level, from / n);
    const k = largestPowerOfTwoBelow(n);
    return nodeHash(rangeRoot(from, from + k), rangeRoot(from + k, to));
  }

  const checkSize = (n: number): void => {
    if (!Number.isSafeInteger(n) || n < 0 || n > size) throw new RangeError(`size ${n} is not within ${size} leaves`);
  };

  function inclusion(index: number, n: number): Hash[] {
    checkSize(n);
    if (!Number.isSafeInteger(index) || index < 0 || index >= n) throw new RangeError(`leaf index ${index} is not in a tree of ${n}`);
    const path: Hash[] = [];
    let from = 0;
    let to = n;
    while (to - from > 1) {
      const k = largestPowerOfTwoBelow(to - from);
      if (index < from + k) {
        path.push(rangeRoot(from + k, to));
        to = from + k;
      } else {
        path.push(rangeRoot(from, from + k));
        from += k;
      }
    }
    return path.reverse();
  }

  function subproof(m: number, from: number, to: number, known: boolean): Hash[] {
    if (m === to - from) return known ? [] : [rangeRoot(from, to)];
    const k = largestPowerOfTwoBelow(to - from);
    if (m <= k) return [...subproof(m, from, from + k, known), rangeRoot(from + k, to)];
    return [...subproof(m - k, from + k, to, false), rangeRoot(from, from + k)];
  }

  function consistency(m: number, n: number): Hash[] {
    checkSize(n);
    if (!Number.isSafeInteger(m) || m < 0 || m > n) throw new RangeError(`size ${m} is not a prefix of a tree of ${n}`);
    if (m === 0 || m === n) return [];
    return subproof(m, 0, n, true);
  }

  return {
    size,
    root: (n) => {
      checkSize(n);
      return rangeRoot(0, n);
    },
    inclusion,
    consistency,
  };
}
