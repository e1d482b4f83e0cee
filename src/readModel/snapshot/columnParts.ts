import type { ColumnName } from './columns.ts';

// Format 5: a column's values as binary parts, and the constants the readers share with it.

/** How a part's bytes are read. */
export const partKinds = ['i8', 'i32', 'f64', 'bool', 'utf8', 'hex', 'json'] as const;
export type PartKind = (typeof partKinds)[number];
export type Part = Readonly<{ name: string; kind: PartKind; bytes: Buffer }>;

/** The shape a column's values take, which decides its binary parts. */
type Shape = 'string' | 'number' | 'boolean' | 'numbers' | 'sends';
export const shapes: Record<ColumnName, Shape> = {
  node: 'string',
  status: 'number',
  caughtUp: 'boolean',
  sentDigest: 'string',
  sentSpec: 'number',
  sentSerial: 'number',
  sentAt: 'string',
  sentResources: 'number',
  sentAcknowledgedAt: 'string',
  receivedAt: 'string',
  declared: 'string',
  class: 'number',
  applied: 'number',
  failed: 'number',
  refused: 'string',
  reportedCarried: 'number',
  missing: 'number',
  carried: 'number',
  lastSeenAt: 'string',
  retiredAt: 'string',
  stale: 'number',
  unknown: 'number',
  undeclared: 'number',
  lastLatencyMs: 'number',
  recentLatenciesMs: 'numbers',
  acknowledged: 'number',
  superseded: 'number',
  earlierSends: 'sends',
  reports: 'number',
  lastReportId: 'string',
  position: 'number',
  revision: 'number',
};

export const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
/** A string's length in a `string` part's lengths: -1 is null, -2 is `true` (the same as the report's). */
export const nullLength = -1;
export const trueLength = -2;

export const jsonPart = (name: string, values: unknown): Part => ({
  name,
  kind: 'json',
  bytes: Buffer.from(JSON.stringify(values), 'utf8'),
});

/** The narrowest numeric part that holds every value exactly; null if one is not a finite number (then the column is JSON). */
function numberPart(name: string, values: readonly unknown[]): Part | null {
  let i8 = true;
  let i32 = true;
  for (const v of values) {
    if (typeof v !== 'number' || !Number.isFinite(v)) return null;
    if (!Number.isInteger(v) || Object.is(v, -0)) {
      i8 = i32 = false;
    } else if (v < -128 || v > 127) {
      i8 = false;
      if (v < -0x80000000 || v > 0x7fffffff) i32 = false;
    }
  }
  const kind: PartKind = i8 ? 'i8' : i32 ? 'i32' : 'f64';
  const array = i8 ? new Int8Array(values as number[]) : i32 ? new Int32Array(values as number[]) : new Float64Array(values as number[]);
  const bytes = Buffer.from(array.buffer, array.byteOffset, array.byteLength);
  if (!littleEndian) {
    if (kind === 'i32') bytes.swap32();
    if (kind === 'f64') bytes.swap64();
  }
  return { name, kind, bytes };
}

/** Lengths and one UTF-8 text; null if a value is not a string, null or true, or the text is not well-formed UTF-16. */
function stringParts(name: string, values: readonly unknown[]): Part[] | null {
  const lengths = new Array<number>(values.length);
  const texts: string[] = [];
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (typeof v === 'string') {
      lengths[i] = v.length;
      texts.push(v);
    } else if (v === null) lengths[i] = nullLength;
    else if (v === true) lengths[i] = trueLength;
    else return null;
  }
  const joined = texts.join('');
  // Digests (every string 64 lowercase hex characters) as their 32 bytes: half the size, and
  // hex by construction, so reading them back checks nothing but their lengths.
  if (texts.length > 0 && texts.every((t) => t.length === 64) && /^[0-9a-f]*$/.test(joined))
    return [numberPart(name, lengths)!, { name: `${name}.text`, kind: 'hex', bytes: Buffer.from(joined, 'hex') }];
  // A lone surrogate does not survive UTF-8; JSON keeps it (as \ud800).
  if (!(joined as unknown as { isWellFormed: () => boolean }).isWellFormed()) return null;
  return [numberPart(name, lengths)!, { name: `${name}.text`, kind: 'utf8', bytes: Buffer.from(joined, 'utf8') }];
}

/** A column's parts: binary where its values allow it, else one JSON part. */
export function encodeColumn(name: ColumnName, values: readonly unknown[]): Part[] {
  const json = [jsonPart(name, values)];
  switch (shapes[name]) {
    case 'string':
      return stringParts(name, values) ?? json;
    case 'boolean': {
      if (!values.every((v) => typeof v === 'boolean')) return json;
      return [{ name, kind: 'bool', bytes: Buffer.from(values.map((v) => (v === true ? 1 : 0))) }];
    }
    case 'number': {
      // Nulls (lastLatencyMs) as a mask beside the numbers.
      if (values.some((v) => v === null)) {
        const p = numberPart(
          name,
          values.map((v) => (v === null ? 0 : v)),
        );
        if (p === null) return json;
        return [p, { name: `${name}.null`, kind: 'bool', bytes: Buffer.from(values.map((v) => (v === null ? 1 : 0))) }];
      }
      const p = numberPart(name, values);
      return p === null ? json : [p];
    }
    case 'numbers': {
      if (!values.every((v) => Array.isArray(v))) return json;
      const counts = (values as unknown[][]).map((v) => v.length);
      const flat = (values as unknown[][]).flat();
      const p = numberPart(`${name}.values`, flat);
      return p === null ? json : [numberPart(name, counts)!, p];
    }
    case 'sends': {
      if (!values.every((v) => Array.isArray(v) && v.every((e) => Array.isArray(e) && e.length === 2))) return json;
      const lists = values as (readonly [unknown, unknown])[][];
      const digests = stringParts(
        `${name}.digests`,
        lists.flatMap((l) => l.map((e) => e[0])),
      );
      const serials = numberPart(
        `${name}.serials`,
        lists.flatMap((l) => l.map((e) => e[1])),
      );
      if (digests === null || serials === null) return json;
      return [
        numberPart(
          name,
          lists.map((l) => l.length),
        )!,
        ...digests,
        serials,
      ];
    }
  }
}
