import { eventLeafHash, eventLeafHashInto } from './leaf.ts';
import type { LeafFields } from './leaf.ts';
import { createTreeBuilder } from './merkle.ts';
import type { SummaryCheck, SummaryFinding } from './rangeSummary.ts';

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
  | 'head'
  /** An archive segment's summary of its leaf range disagrees with the leaves (docs/audit.md "Proofs without the whole log"). */
  | 'summary';

export type Finding = Readonly<{
  kind: TamperKind;
  position: bigint;
  message: string;
  /** A summary finding: the segment's last position (`position` is its first) and its file. */
  to?: bigint;
  segment?: string;
}>;

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
  /**
   * The whole log as checked pages in position order, when the source checks rows itself (on other
   * threads); without it, `read` is walked and checked here. Either way the walk's order checks,
   * the tree and the head stay on this thread.
   */
  checkedPages?: () => AsyncIterable<CheckedPage>;
}>;

export type VerifyOptions = Readonly<{
  pageSize?: number;
  /** Called after every page with the rows walked so far. */
  onProgress?: (events: number) => void;
  /** How far either side of a changed row to look for the position its leaf hash was made at. */
  moveWindow?: number;
  /** Sizes to keep the tree's root at: those of the checkpoints to check (docs/audit.md#checkpoints-and-witnesses). */
  rootsAt?: ReadonlySet<number>;
  /** The archive segments' summaries, checked against the leaves as the walk passes their ranges. */
  summaries?: SummaryCheck;
}>;

const summaryFinding = (f: SummaryFinding): Finding => ({
  kind: 'summary',
  position: f.from,
  to: f.to,
  segment: f.name,
  message: `segment ${f.name}: ${f.message}`,
});

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

/** A gap before this row: a position missing where the store hands them out without gaps. */
function gapBefore(position: bigint, previous: bigint, head: VerifyHead): Finding | null {
  // A row right after the one before (nearly every row) leaves no gap to look for.
  if (head.denseFrom === null || position === previous + 1n) return null;
  const firstMissing = previous + 1n > head.denseFrom ? previous + 1n : head.denseFrom;
  if (firstMissing >= position) return null;
  return {
    kind: 'gap',
    position: firstMissing,
    message: `position ${firstMissing}${firstMissing + 1n < position ? `–${position - 1n}` : ''} is missing: the next stored event is at ${position}`,
  };
}

/** One row's own problem, or null: its bytes against the leaf hash stored beside it. */
function rowProblem(r: StoredLeaf, leaf: Buffer, window: number): Finding | null {
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

/**
 * Rows in position order with their leaves recomputed and checked on their own, the part of the walk
 * that needs no row before it (and so can run on several threads: src/store/audit/verifyPool.ts).
 * `leaves` holds `positions.length` hashes of 32 bytes; `bad` is the first row whose own check failed,
 * and nothing after it is included.
 */
export type CheckedPage = Readonly<{
  positions: ArrayLike<bigint>;
  leaves: Uint8Array;
  bad: Readonly<{ index: number; finding: Finding }> | null;
}>;

/** Check a page of rows on their own, stopping at the first that fails. */
export function checkRows(rows: readonly StoredLeaf[], window = defaultMoveWindow): CheckedPage {
  const leaves = new Uint8Array(rows.length * 32);
  const positions: bigint[] = [];
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i]!;
    // Hashed straight into the page: nearly every row matches, and needs no Buffer of its own.
    eventLeafHashInto(r, leaves, i * 32);
    positions.push(r.position);
    if (r.leafHash !== null && sameHash(leaves, i * 32, r.leafHash)) continue;
    const finding = rowProblem(r, Buffer.from(leaves.subarray(i * 32, i * 32 + 32)), window);
    if (finding !== null) return { positions, leaves: leaves.subarray(0, i * 32), bad: { index: i, finding } };
  }
  return { positions, leaves, bad: null };
}

/** Are the 32 bytes of `page` from `at` the hash `stored`? */
function sameHash(page: Uint8Array, at: number, stored: Uint8Array): boolean {
  if (stored.length !== 32) return false;
  for (let b = 0; b < 32; b++) if (page[at + b] !== stored[b]) return false;
  return true;
}

const defaultMoveWindow = 256;

export async function verifyLog(source: VerifySource, options: VerifyOptions = {}): Promise<VerifyResult> {
  // Pages of 1,000: a page stays alive while it is walked, and larger ones made every young-generation
  // collection copy thousands of rows (5,000 a page cost verify about a fifth more).
  const pageSize = options.pageSize ?? 1_000;
  const window = options.moveWindow ?? defaultMoveWindow;
  let head = await source.head();
  // The head's size as a number, as the tree counts (exact to 2^53 leaves): no BigInt per row.
  let headSize = Number(head.size);
  const tree = createTreeBuilder();
  const rootsAt = options.rootsAt ?? new Set<number>();
  const summaries = options.summaries;
  const roots = new Map<number, string>();
  if (rootsAt.has(0)) roots.set(0, tree.root().toString('hex'));
  let previous = 0n;
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

  const pages = source.checkedPages?.() ?? rawPages(source, pageSize, window);
  for await (const page of pages) {
    const count = page.positions.length;
    for (let i = 0; i < count; i++) {
      const position = page.positions[i]!;
      if (tree.size === headSize) {
        // Past the head read at the start: appends made since are covered by a newer head.
        const problem = headProblem();
        if (problem !== null) return result(problem);
        head = await source.head();
        headSize = Number(head.size);
        if (tree.size >= headSize) {
          return result({
            kind: 'inserted',
            position,
            message: `the event at ${position} is past the stored head (${head.size} events): it was added around the store's append`,
          });
        }
        rootAtHead = null;
      }
      const finding = gapBefore(position, previous, head) ?? (page.bad?.index === i ? page.bad.finding : null);
      if (finding !== null) return result(finding);
      tree.appendLeafHash(page.leaves, i * 32);
      if (summaries !== undefined) {
        const f = summaries.leaf(tree.size - 1, position, page.leaves, i * 32);
        if (f !== null) return result(summaryFinding(f));
      }
      if (rootsAt.has(tree.size)) roots.set(tree.size, tree.root().toString('hex'));
      previous = position;
      if (tree.size === headSize) rootAtHead = tree.root().toString('hex');
    }
    options.onProgress?.(tree.size);
  }
  if (BigInt(tree.size) < head.size) {
    return result({
      kind: 'truncated',
      position: previous + 1n,
      message: `the store holds ${tree.size} events, its head says ${head.size}: the events from ${previous + 1n} on were removed`,
    });
  }
  const unfinished = summaries?.end(tree.size) ?? null;
  if (unfinished !== null) return result(summaryFinding(unfinished));
  return result(headProblem());
}

/** The source's rows read a page at a time and checked on this thread. */
async function* rawPages(source: VerifySource, pageSize: number, window: number): AsyncGenerator<CheckedPage> {
  let after: bigint | null = null;
  for (;;) {
    const rows = await source.read(after, pageSize);
    if (rows.length === 0) return;
    const page = checkRows(rows, window);
    yield page;
    if (page.bad !== null) return;
    after = rows.at(-1)!.position;
  }
}
