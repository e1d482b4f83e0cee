import type { Hash } from './merkle.ts';
import { perfectLevels, proofTreeOver } from './proofTree.ts';
import type { ProofTree } from './proofTree.ts';

// Proofs over a log most of whose leaves are not read (docs/audit.md "Proofs without the whole
// log"): the log is cut into aligned blocks of 2^level leaves, and a complete block is stood for by
// its root, the perfect subtree over it. Only the blocks a proof descends into are given leaf by
// leaf: the block of each leaf proven, the last (partial) one, and the blocks that hold the sizes a
// consistency proof is between. Equal to createProofTree over every leaf, which is the definition
// (test/core/audit/blockProofTree.property.test.ts).

export type BlockSummary = Readonly<{
  /** Leaves in the tree. */
  size: number;
  /** A block is 2^level leaves, aligned. */
  level: number;
  /** The root of each complete block, in order: floor(size / 2^level) of them. */
  roots: readonly Hash[];
  /** The leaf hashes of the blocks read, by block number. A complete block's must give its root. */
  leaves: ReadonlyMap<number, readonly Hash[]>;
}>;

export class BlockSummaryError extends Error {}

export function createBlockProofTree(s: BlockSummary): ProofTree {
  const span = 2 ** s.level;
  const complete = Math.floor(s.size / span);
  if (s.roots.length !== complete)
    throw new BlockSummaryError(`a tree of ${s.size} leaves has ${complete} blocks of ${span}, ${s.roots.length} roots were given`);
  const upper = perfectLevels(s.roots);
  const within = new Map<number, (readonly Hash[])[]>();
  for (const [b, hashes] of s.leaves) {
    const want = b < complete ? span : b === complete ? s.size - complete * span : 0;
    if (hashes.length !== want) throw new BlockSummaryError(`block ${b} holds ${want} leaves, ${hashes.length} were given`);
    const levels = perfectLevels(hashes);
    // A block read whole is checked against the root that stands for it elsewhere.
    if (b < complete && !levels[s.level]![0]!.equals(s.roots[b]!))
      throw new BlockSummaryError(`block ${b}: its leaves do not give the root its summary holds`);
    within.set(b, levels);
  }
  return proofTreeOver(s.size, (level, index) => {
    if (level >= s.level) return upper[level - s.level]![index]!;
    const first = index * 2 ** level;
    const b = Math.floor(first / span);
    const levels = within.get(b);
    if (levels === undefined) throw new RangeError(`block ${b} (leaves from ${b * span}) was not read`);
    return levels[level]![(first - b * span) / 2 ** level]!;
  });
}
