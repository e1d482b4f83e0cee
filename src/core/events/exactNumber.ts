/**
 * A position or revision as a number, exact, or a RangeError: the bulk folds (projections/node/nodeStateFast.ts)
 * and the columnar read (src/store/nodeColumns.ts) hold them as numbers, not a bigint per event, so a
 * store whose positions pass 2^53 fails those reads rather than folding rounded positions.
 */
export function exactNumber(n: number | bigint): number {
  const x = Number(n);
  if (!(x <= Number.MAX_SAFE_INTEGER && x >= -Number.MAX_SAFE_INTEGER))
    throw new RangeError(`position or revision ${n} is past 2^53: the bulk folds and the columnar read hold them as numbers`);
  return x;
}
