import { parseRangeSummary } from '../../core/audit/rangeSummary.ts';
import type { RangeSummaryJson } from '../../core/audit/rangeSummary.ts';

// Each segment's summary of its leaf range kept in the store beside its manifest row
// (docs/audit.md "Proofs without the whole log"), so an export reads the ranges it does not need
// from one table instead of opening every segment's header. The header keeps its own copy (it
// travels with the rows); the store's row is written in the move's transaction, the same summary.
// The roots are kept as bytes (half the size of the header's hex), the foreign rows as the
// header's JSON.

/** A summary as a store row holds it. */
export type StoredSummaryRow = readonly [file: string, first: number, end: number, roots: Uint8Array, foreign: string];

/** The row of `tree` (roots concatenated, 32 bytes each). */
export function summaryRow(file: string, tree: RangeSummaryJson): StoredSummaryRow {
  return [file, tree.first, tree.end, Buffer.from(tree.roots.join(''), 'hex'), JSON.stringify(tree.foreign)];
}

/** A row read back as a summary, or what is wrong with its form (checked as a header's is). */
export function summaryOfRow([, first, end, roots, foreign]: StoredSummaryRow): RangeSummaryJson | string {
  if (roots.length % 32 !== 0) return 'its roots are not hashes';
  const hex = Buffer.from(roots.buffer, roots.byteOffset, roots.byteLength).toString('hex');
  let parsed: unknown;
  try {
    parsed = JSON.parse(foreign);
  } catch {
    return 'its foreign rows are not JSON';
  }
  return parseRangeSummary({ first: Number(first), end: Number(end), roots: hex.match(/.{64}/g) ?? [], foreign: parsed });
}

/** The stored summaries by file, from the rows of a store's summary table. */
export const summariesOfRows = (rows: readonly StoredSummaryRow[]): Map<string, RangeSummaryJson | string> =>
  new Map(rows.map((r) => [r[0], summaryOfRow(r)]));
