import type { ColumnName, TableName } from './columns.ts';
import { jsonPart, littleEndian, nullLength, shapes, trueLength } from './columnParts.ts';
import type { Part, PartKind } from './columnParts.ts';

// encodeColumn over a large column holds the event loop for the whole column (one typed array,
// one joined text, one JSON.stringify per column). encodeColumnSliced makes the same bytes a slice of
// values at a time and awaits `pause` between slices: each kind and flag the one-shot form decides
// over the whole column (i8/i32/f64, digests as hex, well-formed text, JSON) is gathered slice by
// slice, and the parts are put together at the end from arrays preallocated by count. The
// property tests hold it to encodeColumn's bytes for any values and any slice size.

/** Numbers gathered one by one, with what numberPart decides over them (kind, or not numbers at all). */
class NumberSink {
  readonly values: Float64Array;
  at = 0;
  ok = true;
  i8 = true;
  i32 = true;
  constructor(size: number) {
    this.values = new Float64Array(size);
  }
  push(v: unknown): void {
    if (typeof v !== 'number' || !Number.isFinite(v)) {
      this.ok = false;
      return;
    }
    if (!Number.isInteger(v) || Object.is(v, -0)) this.i8 = this.i32 = false;
    else if (v < -128 || v > 127) {
      this.i8 = false;
      if (v < -0x80000000 || v > 0x7fffffff) this.i32 = false;
    }
    this.values[this.at++] = v;
  }
  /** numberPart's part over the same values; null if one was not a finite number. */
  part(name: string): Part | null {
    if (!this.ok) return null;
    const vs = this.values.subarray(0, this.at);
    const kind: PartKind = this.i8 ? 'i8' : this.i32 ? 'i32' : 'f64';
    const array = this.i8 ? new Int8Array(vs) : this.i32 ? new Int32Array(vs) : vs;
    const bytes = Buffer.from(array.buffer, array.byteOffset, array.byteLength);
    if (!littleEndian) {
      if (kind === 'i32') bytes.swap32();
      if (kind === 'f64') bytes.swap64();
    }
    return { name, kind, bytes };
  }
}

const isHighSurrogate = (c: number): boolean => c >= 0xd800 && c <= 0xdbff;

/** stringParts gathered one by one: lengths, and the text joined a slice at a time. */
class StringSink {
  readonly lengths: NumberSink;
  ok = true;
  private texts: string[] = [];
  private chunks: string[] = [];
  /** A high surrogate ending a chunk: it may pair with the next value's first character, so it waits for the next chunk. */
  private carry = '';
  private strings = 0;
  private digests = true;
  private wellFormed = true;
  constructor(size: number) {
    this.lengths = new NumberSink(size);
  }
  push(v: unknown): void {
    if (typeof v === 'string') {
      this.lengths.push(v.length);
      this.texts.push(v);
      this.strings++;
      if (v.length !== 64) this.digests = false;
    } else if (v === null) this.lengths.push(nullLength);
    else if (v === true) this.lengths.push(trueLength);
    else this.ok = false;
  }
  /** The slice's strings joined into one chunk of the text. */
  cut(last = false): void {
    if (!this.ok) return;
    let joined = this.carry + this.texts.join('');
    this.texts = [];
    this.carry = '';
    if (!last && joined.length > 0 && isHighSurrogate(joined.charCodeAt(joined.length - 1))) {
      this.carry = joined.slice(-1);
      joined = joined.slice(0, -1);
    }
    if (joined.length === 0) return;
    if (this.digests && !/^[0-9a-f]*$/.test(joined)) this.digests = false;
    if (this.wellFormed && !(joined as unknown as { isWellFormed: () => boolean }).isWellFormed()) this.wellFormed = false;
    this.chunks.push(joined);
  }
  /** stringParts' parts, the text encoded a chunk at a time; null where stringParts is null. */
  async parts(name: string, pause: () => Promise<void>): Promise<Part[] | null> {
    this.cut(true);
    if (!this.ok) return null;
    const hex = this.strings > 0 && this.digests;
    if (!hex && !this.wellFormed) return null;
    const encoding = hex ? 'hex' : 'utf8';
    const bytes: Buffer[] = [];
    for (const c of this.chunks) {
      bytes.push(Buffer.from(c, encoding));
      await pause();
    }
    return [this.lengths.part(name)!, { name: `${name}.text`, kind: hex ? 'hex' : 'utf8', bytes: Buffer.concat(bytes) }];
  }
}

/** jsonPart, stringified a slice at a time (an array's elements are written alike wherever they stand). */
async function jsonPartSliced(name: string, values: readonly unknown[], slice: number, pause: () => Promise<void>): Promise<Part> {
  const bytes: Buffer[] = [Buffer.from('[')];
  for (let from = 0; from < values.length; from += slice) {
    const text = JSON.stringify(values.slice(from, from + slice));
    bytes.push(Buffer.from(`${from > 0 ? ',' : ''}${text.slice(1, -1)}`, 'utf8'));
    await pause();
  }
  bytes.push(Buffer.from(']'));
  return { name, kind: 'json', bytes: Buffer.concat(bytes) };
}

/**
 * encodeColumn's parts, byte for byte, made `slice` values at a time with `await pause()` between
 * slices, so a writer can keep the event loop free over a large column.
 */
export async function encodeColumnSliced(
  name: ColumnName,
  values: readonly unknown[],
  slice: number,
  pause: () => Promise<void>,
): Promise<Part[]> {
  if (!(slice >= 1)) throw new RangeError(`slice ${slice} is not ≥ 1`);
  const n = values.length;
  /** Each slice of values through `each`; stops early (false) when `each` says the column cannot be binary. */
  const slices = async (each: (from: number, to: number) => boolean): Promise<boolean> => {
    for (let from = 0; from < n; from += slice) {
      if (!each(from, Math.min(n, from + slice))) return false;
      await pause();
    }
    return true;
  };
  const json = async (): Promise<Part[]> => [await jsonPartSliced(name, values, slice, pause)];
  switch (shapes[name]) {
    case 'string': {
      const sink = new StringSink(n);
      const ok = await slices((from, to) => {
        for (let i = from; i < to; i++) sink.push(values[i]);
        sink.cut();
        return sink.ok;
      });
      const parts = ok ? await sink.parts(name, pause) : null;
      return parts ?? (await json());
    }
    case 'boolean': {
      const bytes = Buffer.alloc(n);
      const ok = await slices((from, to) => {
        for (let i = from; i < to; i++) {
          const v = values[i];
          if (typeof v !== 'boolean') return false;
          bytes[i] = v ? 1 : 0;
        }
        return true;
      });
      return ok ? [{ name, kind: 'bool', bytes }] : await json();
    }
    case 'number': {
      // Nulls (lastLatencyMs) as a mask beside the numbers, as 0 among them.
      const sink = new NumberSink(n);
      const mask = Buffer.alloc(n);
      let nulls = false;
      const ok = await slices((from, to) => {
        for (let i = from; i < to; i++) {
          const v = values[i];
          if (v === null) {
            nulls = true;
            mask[i] = 1;
            sink.push(0);
          } else sink.push(v);
        }
        return sink.ok;
      });
      const p = ok ? sink.part(name) : null;
      if (p === null) return await json();
      return nulls ? [p, { name: `${name}.null`, kind: 'bool', bytes: mask }] : [p];
    }
    case 'numbers':
    case 'sends': {
      // First the counts (and the shape: lists, of pairs for sends), then the flattened values into arrays of that size.
      const sends = shapes[name] === 'sends';
      const counts = new NumberSink(n);
      let total = 0;
      const listed = await slices((from, to) => {
        for (let i = from; i < to; i++) {
          const v = values[i];
          if (!Array.isArray(v)) return false;
          if (sends && !v.every((e) => Array.isArray(e) && e.length === 2)) return false;
          counts.push(v.length);
          total += v.length;
        }
        return true;
      });
      if (!listed) return await json();
      const lists = values as readonly (readonly unknown[])[];
      if (!sends) {
        const flat = new NumberSink(total);
        const ok = await slices((from, to) => {
          for (let i = from; i < to; i++) for (const x of lists[i]!) flat.push(x);
          return flat.ok;
        });
        const p = ok ? flat.part(`${name}.values`) : null;
        return p === null ? await json() : [counts.part(name)!, p];
      }
      const digests = new StringSink(total);
      const serials = new NumberSink(total);
      const ok = await slices((from, to) => {
        for (let i = from; i < to; i++) {
          for (const e of lists[i] as readonly (readonly [unknown, unknown])[]) {
            digests.push(e[0]);
            serials.push(e[1]);
          }
        }
        digests.cut();
        return digests.ok;
      });
      const digestParts = ok ? await digests.parts(`${name}.digests`, pause) : null;
      const serialsPart = serials.part(`${name}.serials`);
      if (digestParts === null || serialsPart === null) return await json();
      return [counts.part(name)!, ...digestParts, serialsPart];
    }
  }
}

/** A table's one JSON part. */
export const encodeTable = (name: TableName, values: unknown[]): Part => jsonPart(name, values);
