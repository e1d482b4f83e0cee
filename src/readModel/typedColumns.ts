// The growable typed-array columns the fleet's history keeps (fleetCountLog.ts, fleetPresence.ts):
// a column doubles by copy when full, as an array would, without an object per entry.

export type Column = BigInt64Array | Int32Array | Float64Array | Uint8Array;

/** A copy of `a` in a column of `size` entries, the new ones `fill` (else zero). */
export const grown = <T extends Column>(a: T, size: number, fill?: number): T => {
  const b = new (a.constructor as new (n: number) => T)(size);
  if (fill !== undefined) (b as Int32Array).fill(fill);
  b.set(a as never);
  return b;
};

export const bytesOf = (cols: readonly Column[]): number => cols.reduce((n, c) => n + c.byteLength, 0);
