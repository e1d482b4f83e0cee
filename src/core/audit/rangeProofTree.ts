import { nodeHash, rootOfLeafHashes } from './merkle.ts';
import type { Hash } from './merkle.ts';
import { proofTreeOver } from './proofTree.ts';
import type { ProofTree } from './proofTree.ts';
import { BlockSummaryError } from './blockProofTree.ts';

// The segments' summaries of docs/audit.md "Proofs without the whole log": consecutive leaf ranges
// tile the archived part of the tree, each stood for by the roots of the maximal perfect, aligned
// subtrees that make it up; the ranges read (a node's own segments, the hot tail) are given leaf by
// leaf. Any perfect subtree a proof names is then inside a span read, or exactly a union of whole
// pieces (aligned power-of-two ranges are nested or disjoint), and is hashed up from them.
// Equal to createProofTree over every leaf (test/core/audit/rangeProofTree.property.test.ts).

/** The maximal perfect, aligned subtrees that make up leaves [from, to), left to right: [first leaf, level]. */
export function rangePieces(from: number, to: number): [first: number, level: number][] {
  const out: [number, number][] = [];
  for (let at = from; at < to;) {
    let level = 0;
    while ((at === 0 || at % 2 ** (level + 1) === 0) && at + 2 ** (level + 1) <= to) level++;
    out.push([at, level]);
    at += 2 ** level;
  }
  return out;
}

/** A range's summary from its leaf hashes (`hashes` are leaves [first, first + hashes.length)). */
export function rangeRoots(first: number, hashes: readonly Hash[]): Hash[] {
  return rangePieces(first, first + hashes.length).map(([at, level]) =>
    rootOfLeafHashes(hashes.slice(at - first, at - first + 2 ** level)),
  );
}

export type RangeSummary = Readonly<{ first: number; end: number; roots: readonly Hash[] }>;
export type LeafSpan = Readonly<{ first: number; hashes: readonly Hash[] }>;

/**
 * Proofs over a tree of `size` leaves from the summaries of the ranges not read and the leaves of
 * the spans read. A summary whose range was read whole must agree with its leaves (BlockSummaryError).
 */
export function createRangeProofTree(size: number, ranges: readonly RangeSummary[], spans: readonly LeafSpan[]): ProofTree {
  const known = new Map<string, Hash>();
  const key = (level: number, index: number): string => `${level}:${index}`;
  for (const s of spans) s.hashes.forEach((h, i) => known.set(key(0, s.first + i), h));
  for (const r of ranges) {
    const pieces = rangePieces(r.first, r.end);
    if (pieces.length !== r.roots.length)
      throw new BlockSummaryError(`range ${r.first}-${r.end} is made of ${pieces.length} subtrees, its summary holds ${r.roots.length}`);
    const read = spans.find((s) => s.first <= r.first && r.end <= s.first + s.hashes.length);
    if (read !== undefined) {
      const own = rangeRoots(r.first, read.hashes.slice(r.first - read.first, r.end - read.first));
      if (own.some((h, i) => !h.equals(r.roots[i]!)))
        throw new BlockSummaryError(`range ${r.first}-${r.end}: its leaves do not give the roots its summary holds`);
    }
    pieces.forEach(([at, level], i) => known.set(key(level, at / 2 ** level), r.roots[i]!));
  }
  function perfect(level: number, index: number): Hash {
    const held = known.get(key(level, index));
    if (held !== undefined) return held;
    if (level === 0) throw new RangeError(`leaf ${index} was not read, and no summary covers it`);
    const h = nodeHash(perfect(level - 1, 2 * index), perfect(level - 1, 2 * index + 1));
    known.set(key(level, index), h);
    return h;
  }
  return proofTreeOver(size, perfect);
}
