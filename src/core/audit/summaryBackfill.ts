import { summariseRange } from './rangeSummary.ts';
import type { RangeLeaf, RangeSummaryJson, SummaryCheck } from './rangeSummary.ts';

// The summaries of segments archived without one, recomputed from one walk of the whole log in
// position order (docs/audit.md "Proofs without the whole log", "How the move fills it"). The
// move gives a segment the positions from one past the last position of every segment written
// before it to its own last row; so, taking the segments in the order they were archived, a
// segment whose last position passes every earlier one's owns the positions since the previous
// such segment's last, and any other has an empty range where the running end then stood. Fed the
// leaves `audit verify` has just checked, it gives each pending segment the summary the move
// would have written.

export type SegmentToFill = Readonly<{ name: string; to: bigint }>;

export type SummaryBackfill = SummaryCheck &
  Readonly<{
    /** After the walk: the summaries made, by segment, for those pending whose range the walk completed. */
    made: () => ReadonlyMap<string, RangeSummaryJson>;
  }>;

/**
 * `segments` in the order they were archived; `pending` the names to summarise; `own(name)` the
 * segment's row positions, read when its range closes. Its `leaf` and `end` never report a finding:
 * it records (the checks fed the same walk judge the leaves).
 */
export function createSummaryBackfill(
  segments: readonly SegmentToFill[],
  pending: ReadonlySet<string>,
  own: (name: string) => readonly bigint[],
): SummaryBackfill {
  // The segments that extend the archived span, in order of their last position; each empty one after the one it follows.
  const extending: { s: SegmentToFill; empties: string[] }[] = [];
  for (const s of segments) {
    const last = extending.at(-1);
    if (last === undefined || s.to > last.s.to) extending.push({ s, empties: [] });
    else last.empties.push(s.name);
  }
  const made = new Map<string, RangeSummaryJson>();
  let k = 0;
  let first = 0;
  let leaves: RangeLeaf[] = [];

  /** The range of extending[k] is complete at leaf index `end`: its summary if pending, and those of the empty ones after it. */
  function close(end: number): void {
    const { s, empties } = extending[k]!;
    if (pending.has(s.name)) {
      const mine = new Set(own(s.name));
      made.set(
        s.name,
        summariseRange(first, leaves, (p) => mine.has(p)),
      );
    }
    for (const e of empties) if (pending.has(e)) made.set(e, { first: end, end, roots: [], foreign: [] });
    k++;
    first = end;
    leaves = [];
  }

  let seen: bigint | null = null;
  return {
    leaf(index, position, hashes, at) {
      while (k < extending.length && position > extending[k]!.s.to) close(index);
      if (k < extending.length && pending.has(extending[k]!.s.name))
        leaves.push([position, Buffer.from(hashes.subarray(at, at + 32)).toString('hex')]);
      seen = position;
      return null;
    },
    end(size) {
      // The last range closes if the walk reached its last row; one it did not reach (the log changed) gets none.
      if (k < extending.length && seen === extending[k]!.s.to) close(size);
      return null;
    },
    made: () => made,
  };
}
