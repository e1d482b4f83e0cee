import { createTreeBuilder } from './merkle.ts';
import { rangePieces, rangeRoots } from './rangeProofTree.ts';

// The summary an archive segment keeps of its leaf range (docs/audit.md "Proofs without the whole
// log"): the roots of the maximal perfect subtrees that make up leaves [first, end), and the rows
// inside the range that the segment does not hold (`foreign`, kept hot when it was written), so
// the range's leaves can be read from the segment alone. Made here by the archive move, and
// checked here by `audit verify` against the leaves it has just checked.

/** A summary as a segment's header holds it: leaf indices, roots as hex, foreign rows as [position, leaf hex]. */
export type RangeSummaryJson = Readonly<{
  first: number;
  end: number;
  roots: readonly string[];
  foreign: readonly (readonly [position: string, leaf: string])[];
}>;

/** A row of the log by its position and its leaf hash (hex). */
export type RangeLeaf = readonly [position: bigint, leaf: string];

const isHex32 = (x: unknown): x is string => typeof x === 'string' && /^[0-9a-f]{64}$/.test(x);

/** The summary of leaves [first, first + leaves.length); the rows at positions `own` holds are the segment's. */
export function summariseRange(first: number, leaves: readonly RangeLeaf[], own: (position: bigint) => boolean): RangeSummaryJson {
  for (const [p, leaf] of leaves) if (!isHex32(leaf)) throw new RangeError(`the leaf hash at ${p} is not 32 bytes of hex`);
  return {
    first,
    end: first + leaves.length,
    roots: rangeRoots(
      first,
      leaves.map(([, leaf]) => Buffer.from(leaf, 'hex')),
    ).map((h) => h.toString('hex')),
    foreign: leaves.filter(([p]) => !own(p)).map(([p, leaf]) => [p.toString(), leaf] as const),
  };
}

/** A header's `tree` read as a summary, or what is wrong with its form. */
export function parseRangeSummary(x: unknown): RangeSummaryJson | string {
  if (typeof x !== 'object' || x === null) return 'it is not an object';
  const t = x as Record<string, unknown>;
  const index = (n: unknown): n is number => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;
  if (!index(t['first']) || !index(t['end']) || t['end'] < t['first']) return 'its first and end are not a range of leaf indices';
  const roots = t['roots'];
  if (!Array.isArray(roots) || !roots.every(isHex32)) return 'its roots are not hashes';
  const pieces = rangePieces(t['first'], t['end']).length;
  if (roots.length !== pieces) return `leaves ${t['first']}-${t['end']} are made of ${pieces} subtrees, it holds ${roots.length} roots`;
  const foreign = t['foreign'];
  const row = (r: unknown): r is [string, string] =>
    Array.isArray(r) && r.length === 2 && typeof r[0] === 'string' && /^\d{1,19}$/.test(r[0]) && isHex32(r[1]);
  if (!Array.isArray(foreign) || !foreign.every(row)) return 'its foreign rows are not [position, leaf] pairs';
  return { first: t['first'], end: t['end'], roots, foreign };
}

/** A segment's summary to check, by the segment's name and positions; `summary` is the form's problem when it has none. */
export type SummaryToCheck = Readonly<{ name: string; from: bigint; to: bigint; summary: RangeSummaryJson | string }>;

export type SummaryFinding = Readonly<{ name: string; from: bigint; to: bigint; message: string }>;

/**
 * Fed every leaf of the log in order, it recomputes each summary's roots and foreign rows and says
 * where one first disagrees. `own(name)` is the segment's row positions, ascending, read when the
 * walk enters its range. Ranges must not overlap; a gap between them is a span no summary covers
 * (segments written by a release that kept none), read leaf by leaf.
 */
export type SummaryCheck = Readonly<{
  leaf: (index: number, position: bigint, hashes: Uint8Array, at: number) => SummaryFinding | null;
  /** After the last leaf: a range the walk did not complete. */
  end: (size: number) => SummaryFinding | null;
}>;

export function createSummaryCheck(summaries: readonly SummaryToCheck[], own: (name: string) => readonly bigint[]): SummaryCheck {
  const finding = (s: SummaryToCheck, message: string): SummaryFinding => ({ name: s.name, from: s.from, to: s.to, message });
  let early: SummaryFinding | null = null;
  const ranges: (SummaryToCheck & { summary: RangeSummaryJson })[] = [];
  for (const s of summaries) {
    if (typeof s.summary === 'string') early ??= finding(s, `its summary's form is wrong: ${s.summary}`);
    else ranges.push(s as SummaryToCheck & { summary: RangeSummaryJson });
  }
  ranges.sort((a, b) => a.summary.first - b.summary.first || a.summary.end - b.summary.end);
  for (let i = 1; i < ranges.length; i++)
    if (ranges[i]!.summary.first < ranges[i - 1]!.summary.end)
      early ??= finding(
        ranges[i]!,
        `its leaf range ${rangeText(ranges[i]!)} overlaps ${rangeText(ranges[i - 1]!)} of ${ranges[i - 1]!.name}`,
      );

  let next = 0;
  let active: {
    s: SummaryToCheck & { summary: RangeSummaryJson };
    pieces: [number, number][];
    piece: number;
    builder: ReturnType<typeof createTreeBuilder>;
    foreign: Map<bigint, string>;
    own: readonly bigint[];
    ownAt: number;
  } | null = null;

  /** Empty ranges at `index` are checked as the walk passes them; a non-empty one is entered. */
  function enter(index: number): SummaryFinding | null {
    while (active === null && next < ranges.length && ranges[next]!.summary.first === index) {
      const s = ranges[next++]!;
      if (s.summary.first === s.summary.end) {
        if (s.summary.foreign.length > 0) return finding(s, `its leaf range ${rangeText(s)} is empty, yet it lists foreign rows`);
        continue;
      }
      active = {
        s,
        pieces: rangePieces(s.summary.first, s.summary.end),
        piece: 0,
        builder: createTreeBuilder(),
        foreign: new Map(s.summary.foreign.map(([p, leaf]) => [BigInt(p), leaf])),
        own: own(s.name),
        ownAt: 0,
      };
    }
    return null;
  }

  return {
    leaf(index, position, hashes, at) {
      if (early !== null) return early;
      const entered = enter(index);
      if (entered !== null) return entered;
      const a = active;
      if (a === null) return null;
      const { s } = a;
      while (a.ownAt < a.own.length && a.own[a.ownAt]! < position) a.ownAt++;
      const isOwn = a.ownAt < a.own.length && a.own[a.ownAt] === position;
      const listed = a.foreign.get(position);
      if (isOwn && listed !== undefined) return finding(s, `the row at ${position} is the segment's own, yet listed as foreign`);
      if (!isOwn) {
        if (listed === undefined)
          return finding(
            s,
            `the row at ${position}, leaf ${index}, is inside its leaf range ${rangeText(s)} but neither in the segment nor among its foreign rows`,
          );
        if (listed !== Buffer.from(hashes.subarray(at, at + 32)).toString('hex'))
          return finding(s, `its foreign row at ${position} does not carry that row's leaf hash`);
        a.foreign.delete(position);
      }
      a.builder.appendLeafHash(hashes, at);
      const [, level] = a.pieces[a.piece]!;
      if (a.builder.size === 2 ** level) {
        if (a.builder.root().toString('hex') !== s.summary.roots[a.piece])
          return finding(s, `its root ${a.piece + 1} of ${a.pieces.length} is not the root of those leaves`);
        a.piece++;
        a.builder = createTreeBuilder();
      }
      if (index + 1 === s.summary.end) {
        if (a.foreign.size > 0) return finding(s, `it lists ${a.foreign.size} foreign row(s) not inside its leaf range ${rangeText(s)}`);
        if (position !== s.to)
          return finding(s, `its leaf range ${rangeText(s)} ends at position ${position}, not at its last row ${s.to}`);
        active = null;
      }
      return null;
    },
    end(size) {
      if (early !== null) return early;
      const entered = enter(size);
      if (entered !== null) return entered;
      const left = active?.s ?? ranges[next];
      return left === undefined ? null : finding(left, `its leaf range ${rangeText(left)} reaches past the log's ${size} leaves`);
    },
  };
}

const rangeText = (s: { summary: RangeSummaryJson }): string => `${s.summary.first}-${s.summary.end}`;

/**
 * Several checks fed the same walk, as one: the first finding any of them makes, its message led by
 * that check's label ('' for none). `audit verify` checks the headers' summaries and, where the
 * store keeps a copy that differs, the store's copy, which is what export reads.
 */
export function allSummaryChecks(checks: readonly (readonly [label: string, check: SummaryCheck])[]): SummaryCheck {
  const first = (f: (c: SummaryCheck) => SummaryFinding | null): SummaryFinding | null => {
    for (const [label, c] of checks) {
      const found = f(c);
      if (found !== null) return label === '' ? found : { ...found, message: `${label}: ${found.message}` };
    }
    return null;
  };
  return {
    leaf: (index, position, hashes, at) => first((c) => c.leaf(index, position, hashes, at)),
    end: (size) => first((c) => c.end(size)),
  };
}
