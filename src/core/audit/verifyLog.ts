import { eventLeafHash } from './leaf.ts';
import type { LeafFields } from './leaf.ts';
import { createTreeBuilder } from './merkle.ts';

// `converge audit verify` (docs/audit.md#verifying-a-store): walk the log as stored, recompute
// every leaf and the tree, and say where the log first differs from what the store wrote when it
// appended: the leaf hash beside each row and the head (size, root) kept in the same transactions.
// Pure: it reads through the functions it is given, so any store (or a file of records) can be checked.

export type StoredLeaf = LeafFields & Readonly<{ leafHash: Uint8Array | null }>;

export type VerifyHead = Readonly<{ size: bigint; root: string; denseFrom: bigint | null }>;

export type TamperKind =
  /** A row's bytes no longer give the leaf hash stored beside it. */
  | 'changed'
  /** A row's stored leaf hash is the hash of its bytes at another position: rows were swapped or moved. */
  | 'moved'
  /** A row with no stored leaf hash: written around the store's append. */
  | 'unhashed'
  /** A position missing where the store hands them out without gaps: an event was removed. */
  | 'gap'
  /** Rows past the head's size: appended around the store's append. */
  | 'inserted'
  /** Fewer rows than the head's size: the tail was removed. */
  | 'truncated'
  /** Every row matches its leaf, but the tree over them is not the head's. */
  | 'head';

export type Finding = Readonly<{ kind: TamperKind; position: bigint; message: string }>;

export type VerifyResult = Readonly<{
  /** Rows walked (up to and including the first finding). */
  events: number;
  head: VerifyHead;
  /** The root recomputed over the rows walked, at the head's size when the walk got there. */
  root: string;
  finding: Finding | null;
  /** The tree's root at each size of `rootsAt` the walk reached (checkpoints are checked against them). */
  roots: ReadonlyMap<number, string>;
}>;

export type VerifySource = Readonly<{
  head: () => Promise<VerifyHead>;
  read: (after: bigint | null, limit: number) => Promise<readonly StoredLeaf[]>;
}>;

export type VerifyOptions = Readonly<{
  pageSize?: number;
  /** Called after every page with the rows walked so far. */
  onProgress?: (events: number) => void;
  /** How far either side of a changed row to look for the position its leaf hash was made at. */
  moveWindow?: number;
  /** Sizes to keep the tree's root at: those of the checkpoints to check (docs/audit.md#checkpoints-and-witnesses). */
  rootsAt?: ReadonlySet<number>;
}>;

/** The position near `record` whose leaf of these bytes is the stored hash, if one is. */
function movedFrom(record: StoredLeaf, stored: Uint8Array, window: number): bigint | null {
  const want = Buffer.from(stored);
  for (let d = 1; d <= window; d++) {
    for (const p of [record.position - BigInt(d), record.position + BigInt(d)]) {
      if (p >= 0n && eventLeafHash({ ...record, position: p }).equals(want)) return p;
    }
  }
  return null;
}

/** The first problem with one row, or null: its leaf against the stored one, and its position against the one before. */
function checkRow(r: StoredLeaf, leaf: Buffer, previous: bigint, head: VerifyHead, window: number): Finding | null {
  // A row right after the one before (nearly every row) leaves no gap to look for.
  if (head.denseFrom !== null && r.position !== previous + 1n) {
    const firstMissing = previous + 1n > head.denseFrom ? previous + 1n : head.denseFrom;
    if (firstMissing < r.position) {
      return {
        kind: 'gap',
        position: firstMissing,
        message: `position ${firstMissing}${firstMissing + 1n < r.position ? `–${r.position - 1n}` : ''} is missing: the next stored event is at ${r.position}`,
      };
    }
  }
  if (r.leafHash === null) {
    return {
      kind: 'unhashed',
      position: r.position,
      message: `the event at ${r.position} has no stored leaf hash: it was not written by an append`,
    };
  }
  if (leaf.equals(r.leafHash)) return null;
  const from = movedFrom(r, r.leafHash, window);
  if (from !== null) {
    return {
      kind: 'moved',
      position: r.position,
      message: `the event at ${r.position} was written at ${from}: events were swapped or moved`,
    };
  }
  return {
    kind: 'changed',
    position: r.position,
    message: `the event at ${r.position} (${r.type} in ${r.stream}) does not match its stored leaf hash: its bytes were changed`,
  };
}

export async function verifyLog(source: VerifySource, options: VerifyOptions = {}): Promise<VerifyResult> {
  // Pages of 1,000: a page stays alive while it is walked, and larger ones made every young-generation
  // collection copy thousands of rows (5,000 a page cost verify about a fifth more).
  const pageSize = options.pageSize ?? 1_000;
  const window = options.moveWindow ?? 256;
  let head = await source.head();
  // The head's size as a number, as the tree counts (exact to 2^53 leaves): no BigInt per row.
  let headSize = Number(head.size);
  const tree = createTreeBuilder();
  const rootsAt = options.rootsAt ?? new Set<number>();
  const roots = new Map<number, string>();
  if (rootsAt.has(0)) roots.set(0, tree.root().toString('hex'));
  let previous = 0n;
  let after: bigint | null = null;
  let rootAtHead: string | null = head.size === 0n ? tree.root().toString('hex') : null;
  const result = (finding: Finding | null): VerifyResult => ({
    events: tree.size,
    head,
    root: rootAtHead ?? tree.root().toString('hex'),
    finding,
    roots,
  });
  const headProblem = (): Finding | null =>
    rootAtHead !== null && rootAtHead !== head.root
      ? {
          kind: 'head',
          position: previous,
          message: `the tree of the first ${head.size} events has root ${rootAtHead}, the stored head says ${head.root}`,
        }
      : null;

  for (;;) {
    const page = await source.read(after, pageSize);
    if (page.length === 0) break;
    for (const r of page) {
      if (tree.size === headSize) {
        // Past the head read at the start: appends made since are covered by a newer head.
        const problem = headProblem();
        if (problem !== null) return result(problem);
        head = await source.head();
        headSize = Number(head.size);
        if (tree.size >= headSize) {
          return result({
            kind: 'inserted',
            position: r.position,
            message: `the event at ${r.position} is past the stored head (${head.size} events): it was added around the store's append`,
          });
        }
        rootAtHead = null;
      }
      const leaf = eventLeafHash(r);
      const finding = checkRow(r, leaf, previous, head, window);
      if (finding !== null) return result(finding);
      tree.appendLeafHash(leaf);
      if (rootsAt.has(tree.size)) roots.set(tree.size, tree.root().toString('hex'));
      previous = r.position;
      if (tree.size === headSize) rootAtHead = tree.root().toString('hex');
    }
    after = page.at(-1)!.position;
    options.onProgress?.(tree.size);
  }
  if (BigInt(tree.size) < head.size) {
    return result({
      kind: 'truncated',
      position: previous + 1n,
      message: `the store holds ${tree.size} events, its head says ${head.size}: the events from ${previous + 1n} on were removed`,
    });
  }
  return result(headProblem());
}
