import { eventLeafHash } from '../../core/audit/leaf.ts';
import type { Hash } from '../../core/audit/merkle.ts';
import { BlockSummaryError } from '../../core/audit/blockProofTree.ts';
import { createRangeProofTree } from '../../core/audit/rangeProofTree.ts';
import type { LeafSpan, RangeSummary } from '../../core/audit/rangeProofTree.ts';
import type { ProofTree } from '../../core/audit/proofTree.ts';
import type { RangeSummaryJson } from '../../core/audit/rangeSummary.ts';
import { ConvergeError } from '../../core/errors.ts';
import type { StoredRecord } from '../port.ts';
import { storedOf } from './withArchive.ts';
import type { ArchivedStore } from './withArchive.ts';

// An evidence bundle's proofs over an archived log from the segments' summaries (docs/audit.md
// "Proofs without the whole log"): every summarised range the bundle has no row in stands for
// itself by its roots, and only the segments that hold the node's rows (and the ranges that hold
// a kept row or a leaf asked for by index) are read whole, with the hot rows past the archive.
// The proofs are the bytes a walk of every leaf gives (createRangeProofTree equals createProofTree).

export type KeptRow = StoredRecord & { leafIndex: number };

export type ProofWalk = Readonly<{ tree: ProofTree; kept: KeptRow[]; positions: bigint[] }>;

type Range = Readonly<{ file: string; to: bigint; summary: RangeSummaryJson }>;

/**
 * The first `size` leaves as a proof tree, the rows `keep` wants (those of `stream`, which is the
 * only archived stream it keeps, and hot ones) with their leaf indices, and the positions of the
 * leaves `positionsOf` names. Null when the summaries do not cover the archive (a segment without
 * one, written by the release before, or ranges that do not tile from leaf 0): walk every leaf.
 */
export async function walkBySummaries(
  store: ArchivedStore,
  size: number,
  stream: string,
  keep: (r: StoredRecord) => boolean,
  positionsOf: readonly number[],
): Promise<ProofWalk | null> {
  const { archive, manifest } = store;
  if (manifest.segments.length === 0 || size === 0) return null;
  // The summaries the store keeps beside its manifest; a segment it has none for (archived by the
  // release before, or before they were kept) or one of the wrong form is read from its header.
  const stored = (await store.archiveSummaries?.()) ?? new Map<string, RangeSummaryJson | string>();
  const ranges: Range[] = [];
  for (const s of manifest.segments) {
    const kept = stored.get(s.file);
    const summary = typeof kept === 'object' ? kept : archive.summaryOf(s.file);
    if (summary === null || typeof summary === 'string') return null;
    ranges.push({ file: s.file, to: s.to, summary });
  }
  ranges.sort((a, b) => a.summary.first - b.summary.first || a.summary.end - b.summary.end);
  let archived = 0;
  for (const r of ranges) {
    if (r.summary.first !== archived) return null;
    archived = r.summary.end;
  }
  const lastArchived = manifest.segments.reduce((m, s) => (s.to > m ? s.to : m), manifest.segments[0]!.to);
  const nonEmpty = ranges.filter((r) => r.summary.end > r.summary.first);
  /** The range a leaf index is in. */
  const rangeAt = (index: number): Range => {
    let lo = 0;
    let hi = nonEmpty.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >>> 1;
      if (nonEmpty[mid]!.summary.first <= index) lo = mid;
      else hi = mid - 1;
    }
    return nonEmpty[lo]!;
  };
  /** The range a row listed as foreign is in. */
  const foreignIn = new Map<bigint, Range>();
  for (const r of nonEmpty) for (const [p] of r.summary.foreign) foreignIn.set(BigInt(p), r);

  // The hot rows: past the archive, the tail of the tree; inside it, foreign in some range.
  const tail: Hash[] = [];
  const kept: KeptRow[] = [];
  const wanted = new Set(positionsOf);
  const positionAt = new Map<number, bigint>();
  const hotInside: StoredRecord[] = [];
  const toRead = new Set<Range>();
  // The hot rows inside the archive are read whatever `size` (a checkpoint may end inside the archive), then the tail up to it.
  for (let after: bigint | null = null, full = false; !full;) {
    const page = await store.hot.readStored({ after, limit: 1_000 });
    if (page.length === 0) break;
    for (const r of page) {
      if (r.position <= lastArchived) {
        if (!keep(r)) continue;
        const range = foreignIn.get(r.position);
        if (range === undefined) return null;
        toRead.add(range);
        hotInside.push(r);
        continue;
      }
      if ((full = archived + tail.length >= size)) break;
      if (keep(r)) kept.push({ ...r, leafIndex: archived + tail.length });
      if (wanted.has(archived + tail.length)) positionAt.set(archived + tail.length, r.position);
      tail.push(eventLeafHash(r));
    }
    after = page.at(-1)!.position;
  }
  const treeSize = Math.min(size, archived + tail.length);

  // The node's segments (their stream filters rule the others out; a false positive reads its blocks of the stream only).
  const without = (await store.archiveSegmentsWithout?.(stream)) ?? new Set<string>();
  // A segment with an empty range holds only rows of earlier ranges: it is read for its rows, and those ranges for their leaves.
  for (const r of ranges) if (!without.has(r.file) && archive.streamRowsIn(r.file, stream).length > 0) toRead.add(r);
  const positionsAt = positionsOf.filter((i) => i < archived);
  for (const i of positionsAt) toRead.add(rangeAt(i));

  // Each range read: its leaves from its segment's rows and its foreign ones. A kept row archived into
  // a later segment lies in an earlier range, which is read as well.
  const spans: LeafSpan[] = [];
  const leafOf = new Map<bigint, number>();
  const archivedKept: StoredRecord[] = [];
  const done = new Set<Range>();
  for (let queue = [...toRead]; queue.length > 0;) {
    const range = queue.pop()!;
    if (done.has(range)) continue;
    done.add(range);
    const { first, end, foreign } = range.summary;
    const rows = archive.segmentRows(range.file).map(storedOf);
    const own = rows.map((r) => [r.position, () => eventLeafHash(r)] as const);
    const theirs = foreign.map(([p, leaf]) => [BigInt(p), () => Buffer.from(leaf, 'hex')] as const);
    // The range's rows are the last (end - first) of the two in position order: the segment's rows before them lie in earlier ranges.
    const sorted = [...own, ...theirs].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    const inRange = end === first ? [] : sorted.slice(-(end - first));
    if (inRange.length !== end - first) throw logChanged(range, `it holds ${inRange.length} rows for ${end - first} leaves`);
    if (end > first) spans.push({ first, hashes: inRange.map(([, leaf]) => leaf()) });
    inRange.forEach(([p], i) => {
      leafOf.set(p, first + i);
      if (wanted.has(first + i)) positionAt.set(first + i, p);
    });
    for (const r of rows) {
      if (!keep(r)) continue;
      archivedKept.push(r);
      if (leafOf.has(r.position)) continue;
      const earlier = foreignIn.get(r.position);
      if (earlier === undefined) throw logChanged(range, `its row at ${r.position} is in no range`);
      queue.push(earlier);
    }
  }
  for (const r of [...archivedKept, ...hotInside]) {
    const leafIndex = leafOf.get(r.position);
    if (leafIndex === undefined)
      throw new ConvergeError('CONVERGE_ERR_EVIDENCE_LOG_CHANGED', `the row at ${r.position} is in no range read`);
    if (leafIndex < treeSize) kept.push({ ...r, leafIndex });
  }
  kept.sort((a, b) => a.leafIndex - b.leafIndex);
  spans.push({ first: archived, hashes: tail });

  const summaries: RangeSummary[] = nonEmpty.map((r) => ({
    first: r.summary.first,
    end: r.summary.end,
    roots: r.summary.roots.map((h) => Buffer.from(h, 'hex')),
  }));
  let tree: ProofTree;
  try {
    tree = createRangeProofTree(treeSize, summaries, spans);
  } catch (err) {
    if (!(err instanceof BlockSummaryError)) throw err;
    throw new ConvergeError(
      'CONVERGE_ERR_EVIDENCE_LOG_CHANGED',
      `an archive segment's summary disagrees with its rows (${err.message}): run converge audit verify`,
    );
  }
  const positions = positionsOf.flatMap((i) => {
    const p = i < treeSize ? positionAt.get(i) : undefined;
    return p === undefined ? [] : [p];
  });
  return { tree, kept, positions };
}

const logChanged = (range: Range, why: string): ConvergeError =>
  new ConvergeError(
    'CONVERGE_ERR_EVIDENCE_LOG_CHANGED',
    `archive segment ${range.file}'s summary does not match its rows: ${why}: run converge audit verify`,
  );
