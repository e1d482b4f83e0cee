import { isAscii } from 'node:buffer';
import { SnapshotContentError } from './columns.ts';
import type { Column } from './columns.ts';
import { littleEndian, nullLength, trueLength } from './columnParts.ts';
import type { Part } from './columnParts.ts';

// Format 5's parts read back: numbers as typed arrays over the file's bytes, and string and list
// columns kept where they lie (TextColumn, NumberListColumn), a value made only when a node is
// built — a warm start reads no more than it must. decodeColumn.ts checks what these return.

export type PartReader = Readonly<{ take: (name: string) => Part | undefined }>;

/** A part as numbers (a typed array over the file's bytes where aligned, a copy otherwise). */
export function numbersOf(p: Part): ArrayLike<number> {
  const b = p.bytes;
  switch (p.kind) {
    case 'i8':
      return new Int8Array(b.buffer, b.byteOffset, b.length);
    case 'bool':
      return new Uint8Array(b.buffer, b.byteOffset, b.length);
    case 'i32':
    case 'f64': {
      const size = p.kind === 'i32' ? 4 : 8;
      if (b.length % size !== 0) throw new SnapshotContentError(`part ${p.name}: ${b.length} bytes is not a whole number of ${p.kind}`);
      let src = b;
      if (b.byteOffset % size !== 0 || !littleEndian) {
        src = Buffer.from(b);
        if (!littleEndian) {
          if (size === 4) src.swap32();
          else src.swap64();
        }
      }
      return size === 4
        ? new Int32Array(src.buffer, src.byteOffset, src.length / 4)
        : new Float64Array(src.buffer, src.byteOffset, src.length / 8);
    }
    default:
      throw new SnapshotContentError(`part ${p.name} is ${p.kind}, not numbers`);
  }
}

export function parseJson(p: Part): unknown {
  try {
    return JSON.parse(p.bytes.toString('utf8'));
  } catch (e) {
    throw new SnapshotContentError(`part ${p.name} is not JSON: ${(e as Error).message}`);
  }
}

export const none: readonly never[] = Object.freeze([]);

/** Strings from a lengths part and its text: sliced from one string per column, not made one by one. */
export function stringsOf(lengths: Part, text: Part | undefined, name: string): (string | null | true)[] {
  if (text === undefined || (text.kind !== 'utf8' && text.kind !== 'hex')) throw new SnapshotContentError(`${name}: no text part`);
  const ls = numbersOf(lengths);
  const bytes = text.bytes;
  if (text.kind === 'hex') return digestsOf(ls, bytes, name);
  // ASCII text (times, digests, ids): each string made flat from its bytes. Slices of one string
  // per column were faster to make but took 8 bytes more each and held the column's whole text
  // in the heap. Other text is sliced from the decoded column.
  const ascii = isAscii(bytes);
  const all = ascii ? null : bytes.toString('utf8');
  const size = all === null ? bytes.length : all.length;
  const piece =
    all === null ? (a: number, b: number) => (bytes as unknown as Latin1).latin1Slice(a, b) : (a: number, b: number) => all.slice(a, b);
  const out = new Array<string | null | true>(ls.length);
  let at = 0;
  for (let i = 0; i < ls.length; i++) {
    const l = ls[i]!;
    if (l === nullLength) out[i] = null;
    else if (l === trueLength) out[i] = true;
    else if (l >= 0 && at + l <= size) {
      out[i] = piece(at, at + l);
      at += l;
    } else throw new SnapshotContentError(`${name}[${i}]: a string length ${l} outside its text`);
  }
  if (at !== size) throw new SnapshotContentError(`${name}: ${size - at} characters of text no value names`);
  return out;
}
type Latin1 = { latin1Slice: (from: number, to: number) => string };
type Hex = { hexSlice: (from: number, to: number) => string };

/** Digests from their bytes, 32 each. */
function digestsOf(ls: ArrayLike<number>, bytes: Buffer, name: string): (string | null | true)[] {
  const out = new Array<string | null | true>(ls.length);
  const hex = bytes as unknown as Hex;
  let at = 0;
  for (let i = 0; i < ls.length; i++) {
    const l = ls[i]!;
    if (l === nullLength) out[i] = null;
    else if (l === trueLength) out[i] = true;
    else if (l === 64 && at + 32 <= bytes.length) {
      out[i] = hex.hexSlice(at, at + 32);
      at += 32;
    } else throw new SnapshotContentError(`${name}[${i}]: a digest of length ${l} or outside its bytes`);
  }
  if (at !== bytes.length) throw new SnapshotContentError(`${name}: ${bytes.length - at} bytes of digests no value names`);
  return out;
}

/** Per-node lists from their counts and the flattened values. */
export function listsOf<T>(counts: ArrayLike<number>, values: ArrayLike<T>, name: string, make: (at: number) => T): T[][] {
  const out = new Array<T[]>(counts.length);
  let at = 0;
  for (let i = 0; i < counts.length; i++) {
    const c = counts[i]!;
    if (!Number.isInteger(c) || c < 0 || at + c > values.length)
      throw new SnapshotContentError(`${name}[${i}]: a count ${c} outside its values`);
    if (c === 0) out[i] = none as unknown as T[];
    else {
      const l = new Array<T>(c);
      for (let k = 0; k < c; k++) l[k] = make(at + k);
      out[i] = l;
    }
    at += c;
  }
  if (at !== values.length) throw new SnapshotContentError(`${name}: ${values.length - at} values no node names`);
  return out;
}

// ------------------------------------------------------------------ columns read in place

/**
 * A string column read where it lies (a warm start reads no more than it must): the lengths, where each value
 * starts, and the file's bytes; a value is made into a string only when node i is built. ASCII
 * text and digests only (other text is decoded whole, as stringsOf does). The lengths and
 * offsets are checked against the text when the column is made, as stringsOf checks them.
 */
export class TextColumn implements Column<string | null | true> {
  private constructor(
    /** Per value: its length, -1 for null, -2 for true. */
    readonly lengths: ArrayLike<number>,
    private readonly starts: Int32Array,
    private readonly bytes: Buffer,
    private readonly hex: boolean,
  ) {}
  get length(): number {
    return this.lengths.length;
  }
  at(i: number): string | null | true {
    const l = this.lengths[i]!;
    if (l === nullLength) return null;
    if (l === trueLength) return true;
    const from = this.starts[i]!;
    return this.hex
      ? (this.bytes as unknown as Hex).hexSlice(from, from + 32)
      : (this.bytes as unknown as Latin1).latin1Slice(from, from + l);
  }
  /** The ISO time at i as Date.parse gives it, read from the bytes when it is in the form toISOString writes. */
  timeAt(i: number): number {
    const l = this.lengths[i]!;
    if (l < 0) return NaN;
    if (!this.hex) {
      const ms = isoBytesMs(this.bytes, this.starts[i]!, l);
      if (ms !== null) return ms;
    }
    return Date.parse(this.at(i) as string);
  }
  /** The column over a lengths part and its text; null when the text is not ASCII or hex (read it with stringsOf). */
  static of(lengths: Part, text: Part | undefined, name: string): TextColumn | null {
    if (text === undefined || (text.kind !== 'utf8' && text.kind !== 'hex')) throw new SnapshotContentError(`${name}: no text part`);
    const ls = numbersOf(lengths);
    const bytes = text.bytes;
    const hex = text.kind === 'hex';
    if (!hex && !isAscii(bytes)) return null;
    const starts = new Int32Array(ls.length);
    let at = 0;
    for (let i = 0; i < ls.length; i++) {
      const l = ls[i]!;
      starts[i] = at;
      if (l === nullLength || l === trueLength) continue;
      if (hex) {
        if (l !== 64 || at + 32 > bytes.length)
          throw new SnapshotContentError(`${name}[${i}]: a digest of length ${l} or outside its bytes`);
        at += 32;
      } else {
        if (!(l >= 0 && at + l <= bytes.length)) throw new SnapshotContentError(`${name}[${i}]: a string length ${l} outside its text`);
        at += l;
      }
    }
    if (at !== bytes.length)
      throw new SnapshotContentError(
        hex
          ? `${name}: ${bytes.length - at} bytes of digests no value names`
          : `${name}: ${bytes.length - at} characters of text no value names`,
      );
    return new TextColumn(ls, starts, bytes, hex);
  }
}

/** Two decimal digits at `at` as a number; negative if either is not a digit. */
const twoDigits = (b: Uint8Array, at: number): number => {
  const h = b[at]! - 0x30;
  const l = b[at + 1]! - 0x30;
  return h >= 0 && h <= 9 && l >= 0 && l <= 9 ? h * 10 + l : -1;
};
/**
 * Date.parse of `YYYY-MM-DDTHH:MM:SS.sssZ` (what toISOString writes) read from bytes, without
 * making the string; null for anything else (a day past the 28th, a year before 100, another
 * form), which the caller parses with Date.parse itself. test/readModel/snapshot/lazyRestore.property.test.ts
 * holds it to Date.parse.
 */
export function isoBytesMs(b: Uint8Array, at: number, length: number): number | null {
  if (length !== 24) return null;
  if (b[at + 4] !== 0x2d || b[at + 7] !== 0x2d || b[at + 10] !== 0x54 || b[at + 13] !== 0x3a || b[at + 16] !== 0x3a) return null;
  if (b[at + 19] !== 0x2e || b[at + 23] !== 0x5a) return null;
  const century = twoDigits(b, at);
  const yy = twoDigits(b, at + 2);
  const month = twoDigits(b, at + 5);
  const day = twoDigits(b, at + 8);
  const hour = twoDigits(b, at + 11);
  const minute = twoDigits(b, at + 14);
  const second = twoDigits(b, at + 17);
  const tenths = twoDigits(b, at + 20);
  const last = b[at + 22]! - 0x30;
  if (century < 1 || yy < 0 || month < 1 || month > 12 || day < 1 || day > 28 || hour < 0 || hour > 23) return null;
  if (minute < 0 || minute > 59 || second < 0 || second > 59 || tenths < 0 || !(last >= 0 && last <= 9)) return null;
  return Date.UTC(century * 100 + yy, month - 1, day, hour, minute, second, tenths * 10 + last);
}

/** Per-node lists of numbers read in place: counts, where each list starts, the flattened values. */
export class NumberListColumn implements Column<number[]> {
  private constructor(
    readonly counts: ArrayLike<number>,
    readonly starts: Int32Array,
    readonly flat: ArrayLike<number>,
  ) {}
  get length(): number {
    return this.counts.length;
  }
  /** The list at i: a list of its own (one of one latency, most often), or the shared empty list. */
  at(i: number): number[] {
    const c = this.counts[i]!;
    const at = this.starts[i]!;
    if (c === 0) return none as unknown as number[];
    if (c === 1) return [this.flat[at]!];
    const l: number[] = [];
    for (let k = 0; k < c; k++) l.push(this.flat[at + k]!);
    return l;
  }
  /** Every count a whole number, and the counts adding up to the values. */
  static of(counts: ArrayLike<number>, flat: ArrayLike<number>, name: string): NumberListColumn {
    const starts = new Int32Array(counts.length);
    let at = 0;
    for (let i = 0; i < counts.length; i++) {
      const c = counts[i]!;
      if (!Number.isInteger(c) || c < 0 || at + c > flat.length)
        throw new SnapshotContentError(`${name}[${i}]: a count ${c} outside its values`);
      starts[i] = at;
      at += c;
    }
    if (at !== flat.length) throw new SnapshotContentError(`${name}: ${flat.length - at} values no node names`);
    return new NumberListColumn(counts, starts, flat);
  }
}
