import { arrayColumn, checkColumn, columnChecks, SnapshotContentError, tableSchemas } from './columns.ts';
import type { Column, ColumnName, TableName, Tables } from './columns.ts';
import { nullLength, shapes, trueLength } from './columnParts.ts';
import type { Part } from './columnParts.ts';
import { listsOf, none, NumberListColumn, numbersOf, parseJson, stringsOf, TextColumn } from './columnsInPlace.ts';
import type { PartReader } from './columnsInPlace.ts';

// Format 5: one column (or table) from its parts, checked — whole columns at once where their
// bounds say enough, value by value (columns.ts's checks) where they do not.

/** A column's values from its parts (taken from `parts`), checked value by value. */
export function decodeColumn(name: ColumnName, parts: PartReader, nodes: number): Column<unknown> {
  const main = parts.take(name);
  if (main === undefined) throw new MissingPartError(name);
  let values: ArrayLike<unknown>;
  if (main.kind === 'json') {
    const v = parseJson(main);
    if (!Array.isArray(v)) throw new SnapshotContentError(`${name}: expected an array of ${columnChecks[name].what}`);
    values = v;
  } else {
    switch (shapes[name]) {
      case 'string': {
        const text = parts.take(`${name}.text`);
        const lazy = TextColumn.of(main, text, name);
        if (lazy !== null && stringsPass(name, lazy.lengths, text!)) return sized(name, lazy, nodes);
        values = lazy === null ? stringsOf(main, text, name) : Array.from({ length: lazy.length }, (_, i) => lazy.at(i));
        if (lazy === null && stringsPass(name, numbersOf(main), text!)) return sized(name, arrayColumn(values), nodes);
        break;
      }
      case 'boolean': {
        if (main.kind !== 'bool') throw new SnapshotContentError(`${name}: a ${main.kind} part, not bool`);
        const b = numbersOf(main);
        const out = new Array<unknown>(b.length);
        let pass = true;
        for (let i = 0; i < b.length; i++) {
          const v = b[i]!;
          out[i] = v === 1 ? true : v === 0 ? false : v;
          if (v > 1) pass = false;
        }
        if (pass) return sized(name, arrayColumn(out), nodes);
        values = out;
        break;
      }
      case 'number': {
        const ns = numbersOf(main);
        const mask = parts.take(`${name}.null`);
        if (mask === undefined) values = ns;
        else {
          const m = numbersOf(mask);
          if (m.length !== ns.length) throw new SnapshotContentError(`${name}: ${m.length} null flags for ${ns.length} values`);
          let pass = name === 'lastLatencyMs';
          for (let i = 0; i < ns.length && pass; i++) if (!(ns[i]! >= 0) || m[i]! > 1) pass = false;
          // Only lastLatencyMs has nulls: a mask of 0/1 over finite numbers ≥ 0 (a typed array holds no NaN from the writer) passes.
          if (pass && !hasNaN(ns)) return sized(name, { length: ns.length, at: (i) => (m[i] === 1 ? null : ns[i]!) }, nodes);
          const out = new Array<number | null>(ns.length);
          for (let i = 0; i < ns.length; i++) out[i] = m[i] === 1 ? null : ns[i]!;
          values = out;
        }
        break;
      }
      case 'numbers': {
        const vs = parts.take(`${name}.values`);
        if (vs === undefined) throw new MissingPartError(`${name}.values`);
        const flat = numbersOf(vs);
        const lists = NumberListColumn.of(numbersOf(main), flat, name);
        // recentLatenciesMs: lists of finite latencies ≥ 0.
        if (allAtLeast(flat, 0)) return sized(name, lists, nodes);
        values = Array.from({ length: lists.length }, (_, i) => lists.at(i));
        break;
      }
      case 'sends': {
        const ds = parts.take(`${name}.digests`);
        const ss = parts.take(`${name}.serials`);
        if (ds === undefined || ss === undefined) throw new MissingPartError(`${name}.digests`);
        const digestsText = parts.take(`${name}.digests.text`);
        const serials = numbersOf(ss);
        const counts = numbersOf(main);
        const fixed = fixedDigests(name, counts, numbersOf(ds), digestsText, serials);
        if (fixed !== null) return sized(name, fixed, nodes);
        const lazy = TextColumn.of(ds, digestsText, `${name}.digests`);
        // earlierSends: [digest, serial ≥ 0] pairs.
        if (lazy !== null && stringsPass('sentDigest', lazy.lengths, digestsText!, 64) && allWholeAtLeast(serials, 0)) {
          if (serials.length !== lazy.length)
            throw new SnapshotContentError(`${name}: ${lazy.length} digests for ${serials.length} serials`);
          const lists = NumberListColumn.of(counts, serials, name);
          const at = (i: number): unknown => {
            const c = lists.counts[i]!;
            if (c === 0) return none;
            const from = lists.starts[i]!;
            const l = new Array<unknown>(c);
            for (let k = 0; k < c; k++) l[k] = [lazy.at(from + k), serials[from + k]];
            return l;
          };
          return sized(name, { length: counts.length, at }, nodes);
        }
        const digests =
          lazy === null ? stringsOf(ds, digestsText, `${name}.digests`) : Array.from({ length: lazy.length }, (_, i) => lazy.at(i));
        if (serials.length !== digests.length)
          throw new SnapshotContentError(`${name}: ${digests.length} digests for ${serials.length} serials`);
        values = listsOf<unknown>(counts, digests, name, (k) => [digests[k], serials[k]]);
        if (lazy === null && stringsPass('sentDigest', numbersOf(ds), digestsText!, 64) && allWholeAtLeast(serials, 0))
          return sized(name, arrayColumn(values), nodes);
        break;
      }
    }
  }
  checkColumn(name, values);
  return sized(name, arrayColumn(values), nodes);
}

/**
 * earlierSends as this engine writes it: every digest 64 hex characters (32 bytes, lengths all
 * 64) and every serial whole and ≥ 0. Checked over typed arrays in tight loops and read in place, the
 * k-th digest at 32·k: no offsets per digest, so a node's eight sends cost the restore little more
 * than one. Null when the parts are otherwise (the general path checks them value by value).
 */
function fixedDigests(
  name: ColumnName,
  counts: ArrayLike<number>,
  lengths: ArrayLike<number>,
  text: Part | undefined,
  serials: ArrayLike<number>,
): Column<unknown> | null {
  if (text?.kind !== 'hex' || !(lengths instanceof Int8Array) || text.bytes.length !== lengths.length * 32) return null;
  if (serials.length !== lengths.length || !allWholeAtLeast(serials, 0)) return null;
  for (let k = 0; k < lengths.length; k++) if (lengths[k] !== 64) return null;
  const lists = NumberListColumn.of(counts, serials, name);
  const hex = text.bytes as unknown as { hexSlice: (from: number, to: number) => string };
  const at = (i: number): unknown => {
    const c = lists.counts[i]!;
    if (c === 0) return none;
    const from = lists.starts[i]!;
    const l = new Array<unknown>(c);
    for (let k = 0; k < c; k++) l[k] = [hex.hexSlice((from + k) * 32, (from + k + 1) * 32), serials[from + k]];
    return l;
  };
  return { length: counts.length, at };
}

function sized<T extends Readonly<{ length: number }>>(name: ColumnName, values: T, nodes: number): T {
  if (values.length !== nodes) throw new SnapshotContentError(`column ${name} has ${values.length} values for ${nodes} nodes`);
  return values;
}

const hasNaN = (xs: ArrayLike<number>): boolean => {
  for (let i = 0; i < xs.length; i++) if (xs[i] !== xs[i]) return true;
  return false;
};
/** Every value finite and ≥ min. */
const allAtLeast = (xs: ArrayLike<number>, min: number): boolean => {
  // Whole numbers are finite: their least is enough, found by a loop over one array type (a loop
  // shared by every type of array read each latency several times slower, the most of a node's 16).
  if (xs instanceof Int32Array) return leastInt32(xs) >= min;
  if (xs instanceof Int8Array) return leastInt8(xs) >= min;
  for (let i = 0; i < xs.length; i++) if (!(xs[i]! >= min && xs[i]! < Infinity)) return false;
  return true;
};
function leastInt32(xs: Int32Array): number {
  let least = Infinity;
  for (let i = 0; i < xs.length; i++) if (xs[i]! < least) least = xs[i]!;
  return least;
}
function leastInt8(xs: Int8Array): number {
  let least = Infinity;
  for (let i = 0; i < xs.length; i++) if (xs[i]! < least) least = xs[i]!;
  return least;
}
const allWholeAtLeast = (xs: ArrayLike<number>, min: number): boolean => {
  if (xs instanceof Int8Array || xs instanceof Int32Array) return allAtLeast(xs, min);
  for (let i = 0; i < xs.length; i++) if (!(xs[i]! >= min && Number.isSafeInteger(xs[i]))) return false;
  return true;
};

/**
 * A string column's checks over its lengths and text, for the whole column at once: a string of
 * lengths −1 (null), −2 (true) or ≥ 0, and one text for the digests' hex. False sends the column
 * through the value-by-value check, which names what is wrong (or finds nothing and accepts).
 */
const stringRules: Partial<Record<ColumnName, Readonly<{ min: number; digest?: true; nonEmpty?: true }>>> = {
  node: { min: 1 },
  sentDigest: { min: nullLength, digest: true },
  sentAt: { min: nullLength },
  sentAcknowledgedAt: { min: trueLength },
  receivedAt: { min: nullLength },
  declared: { min: trueLength, digest: true },
  refused: { min: 0 },
  lastSeenAt: { min: trueLength },
  retiredAt: { min: nullLength },
  lastReportId: { min: nullLength, nonEmpty: true },
};
function stringsPass(name: ColumnName, lengths: ArrayLike<number>, text: Part, min?: number): boolean {
  const rule = stringRules[name];
  if (rule === undefined) return false;
  const least = min ?? rule.min;
  for (let i = 0; i < lengths.length; i++) {
    const l = lengths[i]!;
    if (l < least || (rule.nonEmpty === true && l === 0)) return false;
    if (rule.digest === true && l >= 0 && l !== 64) return false;
  }
  return rule.digest !== true || text.kind === 'hex' || isHex(text.bytes);
}
/** Lowercase hex bytes only: a loop over the bytes (a regex over the text is slower). */
function isHex(b: Uint8Array): boolean {
  for (let i = 0; i < b.length; i++) {
    const c = b[i]!;
    if (!((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66))) return false;
  }
  return true;
}

/** A part the format needs is not in the file. */
export class MissingPartError extends Error {
  constructor(readonly part: string) {
    super(`snapshot has no part ${part}`);
  }
}

/** Tables from their JSON parts, each checked by its zod schema. */
export function decodeTable<K extends TableName>(name: K, parts: PartReader): Tables[K] {
  const p = parts.take(name);
  if (p === undefined) throw new MissingPartError(name);
  if (p.kind !== 'json') throw new SnapshotContentError(`table ${name}: a ${p.kind} part, not json`);
  const r = tableSchemas[name].safeParse(parseJson(p));
  if (!r.success) {
    const issue = r.error.issues[0];
    throw new SnapshotContentError(`${name}${issue === undefined ? '' : `[${issue.path.join('][')}]`}: ${issue?.message ?? 'invalid'}`);
  }
  return r.data as Tables[K];
}
