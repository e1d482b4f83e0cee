import { isAscii } from 'node:buffer';
import { z } from 'zod';
import { nodeStatuses, reportClasses } from '../../projections/index.ts';
import type { Anomalies, EarlierSend, NodeState, NodeStatus, ReportedSummary, SentSummary } from '../../projections/index.ts';

// The read-model snapshot's body: the node states as columns, one per field, with the values
// many nodes share — spec digests, resource-id lists, port lists, failure maps — written once in
// tables and named by index. The fold shares those values between nodes in memory; decoding puts
// the sharing back (one object per table entry), so a restored model takes no more heap than a
// folded one.
//
// Format 5 (this file) writes each column as binary parts: numbers as little-endian typed arrays
// (int8, int32 or float64, the narrowest that holds the column), booleans as bytes, strings as
// their lengths plus one UTF-8 text, lists as counts plus the flattened values. Restoring reads
// typed arrays and slices one string per column: no JSON.parse per node (format 4, one JSON array
// per column, spent ~0.6 s parsing and checking 100,000 nodes and made most of the restore's
// garbage). A column holding a value its binary form cannot carry exactly (a string where a
// count belongs, a lone surrogate, a position past 2^53) is written as JSON instead, and the
// checks below refuse or accept it as they would any value.
//
// Every column is checked value by value (issue 13 item 3: a snapshot was trusted blindly, and a
// string where a number belongs came back as "reports":"NaN111"), so a value of the wrong type or
// out of range refuses the whole snapshot. Format 4 (snapshotFormat4.ts) is still read.

/** Columns (one value per node) and then tables, in file order. */
export const columnNames = [
  'node',
  'status',
  'caughtUp',
  'sentDigest',
  'sentSpec',
  'sentSerial',
  'sentAt',
  'sentResources',
  'sentAcknowledgedAt',
  'receivedAt',
  'declared',
  'class',
  'applied',
  'failed',
  'refused',
  'reportedCarried',
  'missing',
  'carried',
  'lastSeenAt',
  'stale',
  'unknown',
  'undeclared',
  'lastLatencyMs',
  'recentLatenciesMs',
  'acknowledged',
  'superseded',
  'earlierSends',
  'reports',
  'lastReportId',
  'position',
  'revision',
] as const;
export const tableNames = ['specs', 'lists', 'ports', 'failures'] as const;
export const sectionNames = [...columnNames, ...tableNames] as const;
export type ColumnName = (typeof columnNames)[number];
export type TableName = (typeof tableNames)[number];
export type SectionName = (typeof sectionNames)[number];

// ------------------------------------------------------------------ checks

/** One value of a column: what it must be, said in the refusal. */
export type Check<T> = Readonly<{ what: string; ok: (v: unknown) => v is T }>;

const isInt = (v: unknown, min: number, max = Number.MAX_SAFE_INTEGER): v is number =>
  typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max;
/** 64 lowercase hex characters; a loop, not a regex (the regex cost ~0.8 µs a digest, 80 ms a restore). */
const isDigest = (v: unknown): v is string => {
  if (typeof v !== 'string' || v.length !== 64) return false;
  for (let i = 0; i < 64; i++) {
    const c = v.charCodeAt(i);
    if (!((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66))) return false;
  }
  return true;
};
const isNumbers = (v: unknown, min: number): v is number[] =>
  Array.isArray(v) && v.every((x) => typeof x === 'number' && Number.isFinite(x) && x >= min);
const nullable = <T>(c: Check<T>): Check<T | null> => ({ what: `${c.what} or null`, ok: (v): v is T | null => v === null || c.ok(v) });

const sameAsReport: Check<true | null | string> = {
  what: 'true, null or a time',
  ok: (v): v is true | null | string => v === true || v === null || typeof v === 'string',
};
const count: Check<number> = { what: 'a whole number ≥ 0', ok: (v): v is number => isInt(v, 0) };
const index: Check<number> = { what: 'a table index or -1', ok: (v): v is number => isInt(v, -1) };
const digest: Check<string> = { what: '64 lowercase hex characters', ok: isDigest };
const text: Check<string> = { what: 'a string', ok: (v): v is string => typeof v === 'string' };
const nonEmpty: Check<string> = { what: 'a non-empty string', ok: (v): v is string => typeof v === 'string' && v.length > 0 };
/** 64-bit positions: numbers while they are safe integers, decimal strings beyond. */
const big = (min: number): Check<number | string> => ({
  what: `a whole number ≥ ${min} or a decimal string`,
  ok: (v): v is number | string => isInt(v, min) || (typeof v === 'string' && /^-?\d{1,20}$/.test(v)),
});

export const columnChecks = {
  node: nonEmpty,
  status: { what: 'a status index', ok: (v): v is number => isInt(v, 0, nodeStatuses.length - 1) },
  caughtUp: { what: 'a boolean', ok: (v): v is boolean => typeof v === 'boolean' },
  sentDigest: nullable(digest),
  sentSpec: index,
  sentSerial: count,
  sentAt: nullable(text),
  sentResources: index,
  /** true: the same time as the report's `receivedAt` (the first matching report acknowledges its send). */
  sentAcknowledgedAt: sameAsReport,
  receivedAt: nullable(text),
  /** true: the digest of `sent` (most reports name the latest send); null: a legacy report. */
  declared: { what: 'true, null or a digest', ok: (v): v is true | null | string => v === true || v === null || isDigest(v) },
  class: { what: 'a report class index or -1', ok: (v): v is number => isInt(v, -1, reportClasses.length - 1) },
  applied: index,
  failed: index,
  refused: text,
  reportedCarried: index,
  missing: count,
  carried: count,
  lastSeenAt: sameAsReport,
  stale: count,
  unknown: count,
  undeclared: count,
  lastLatencyMs: {
    what: 'a latency ≥ 0 or null',
    ok: (v): v is number | null => v === null || (typeof v === 'number' && Number.isFinite(v) && v >= 0),
  },
  recentLatenciesMs: { what: 'a list of latencies ≥ 0', ok: (v): v is number[] => isNumbers(v, 0) },
  acknowledged: count,
  superseded: count,
  earlierSends: {
    what: 'a list of [digest, serial]',
    ok: (v): v is [string, number][] =>
      Array.isArray(v) && v.every((e) => Array.isArray(e) && e.length === 2 && isDigest(e[0]) && isInt(e[1], 0)),
  },
  reports: count,
  lastReportId: nullable(nonEmpty),
  position: big(0),
  revision: big(-1),
} satisfies Record<ColumnName, Check<unknown>>;

type ValueOf<C> = C extends Check<infer T> ? T : never;
/** Columns as arrays or typed arrays, one value per node (format 4's sections). */
export type ColumnArrays = { [K in ColumnName]: ArrayLike<ValueOf<(typeof columnChecks)[K]>> };
/**
 * A decoded column: node i's value when asked. Strings, lists and nullable numbers of a binary
 * column are made from the file's bytes only then (issue 10: warm start), others are read from
 * an array or a typed array.
 */
export type Column<T> = Readonly<{ length: number; at: (i: number) => T }>;
/** Decoded, checked columns. */
export type Columns = { [K in ColumnName]: Column<ValueOf<(typeof columnChecks)[K]>> };
/** A column over an array or a typed array. */
export const arrayColumn = <T>(values: ArrayLike<T>): Column<T> => ({ length: values.length, at: (i) => values[i]!, values }) as Column<T>;
/** A column's values as an array to index in a loop over every node (a call per value costs ~10× an index, cold). */
const valuesOf = <T>(c: Column<T>): ArrayLike<T> =>
  (c as { values?: ArrayLike<T> }).values ?? Array.from({ length: c.length }, (_, i) => c.at(i));

export const tableSchemas = {
  specs: z.array(z.string().regex(/^[0-9a-f]{64}$/)),
  lists: z.array(z.array(z.string())),
  ports: z.array(z.array(z.number().int())),
  failures: z.array(z.array(z.tuple([z.string(), z.string()]))),
} satisfies Record<TableName, z.ZodType>;
export type Tables = { [K in TableName]: z.infer<(typeof tableSchemas)[K]> };

export class SnapshotContentError extends Error {}

/** Every value of a decoded column passes its check; the first that does not throws SnapshotContentError naming it. */
export function checkColumn(name: ColumnName, values: ArrayLike<unknown>): void {
  // A typed array of integers checked by a range: its bounds in one tight loop; the per-value
  // check (a call per value, ~40 ns, 0.1 s over a 100,000-node snapshot) runs only to name a failure.
  const range = ranges[name];
  if (range !== undefined && (values instanceof Int8Array || values instanceof Int32Array)) {
    let lo = 0;
    let hi = 0;
    for (let i = 0; i < values.length; i++) {
      const v = values[i]!;
      if (v < lo) lo = v;
      else if (v > hi) hi = v;
    }
    if (values.length === 0 || (lo >= range[0] && hi <= range[1])) return;
  }
  const c: Check<unknown> = columnChecks[name];
  for (let i = 0; i < values.length; i++) {
    if (!c.ok(values[i])) {
      const v = values[i];
      throw new SnapshotContentError(`${name}[${i}]: expected ${c.what}, got ${JSON.stringify(v)?.slice(0, 80) ?? String(v)}`);
    }
  }
}

/** The columns whose check is "an integer in [min, max]" (and 0 within it: the bounds loop starts there). */
const ranges: Partial<Record<ColumnName, readonly [number, number]>> = {
  status: [0, nodeStatuses.length - 1],
  class: [-1, reportClasses.length - 1],
  ...Object.fromEntries(
    (['sentSpec', 'sentResources', 'applied', 'failed', 'reportedCarried'] as const).map((n) => [
      n,
      [-1, Number.MAX_SAFE_INTEGER] as const,
    ]),
  ),
  ...Object.fromEntries(
    (
      ['sentSerial', 'missing', 'carried', 'stale', 'unknown', 'undeclared', 'acknowledged', 'superseded', 'reports', 'position'] as const
    ).map((n) => [n, [0, Number.MAX_SAFE_INTEGER] as const]),
  ),
  revision: [-1, Number.MAX_SAFE_INTEGER],
  // Null or a latency ≥ 0: a column of whole numbers (no nulls) passes by its bounds too.
  lastLatencyMs: [0, Number.MAX_SAFE_INTEGER],
};

// ------------------------------------------------------------------ encoding

/** Equal values get one index; the objects the fold shares are found by identity first. */
function createTable<T>(key: (v: T) => string) {
  const byObject = new Map<T, number>();
  const byKey = new Map<string, number>();
  const values: T[] = [];
  return {
    values,
    indexOf(v: T): number {
      let i = byObject.get(v);
      if (i !== undefined) return i;
      const k = key(v);
      i = byKey.get(k);
      if (i === undefined) {
        i = values.length;
        values.push(v);
        byKey.set(k, i);
      }
      byObject.set(v, i);
      return i;
    },
  };
}

export type Encoder = Readonly<{
  /** One column's values over states [from, to). */
  values: (name: ColumnName, from: number, to: number) => unknown[];
  /** A table's values; complete once every column is encoded. */
  table: (name: TableName) => unknown[];
}>;

/** Column values of immutable states: the caller encodes in slices and may yield between them. */
export function createEncoder(states: readonly NodeState[], position: bigint): Encoder {
  const specs = createTable<string>((s) => s);
  const lists = createTable<readonly string[]>((l) => JSON.stringify(l));
  const ports = createTable<readonly number[]>((l) => JSON.stringify(l));
  const failures = createTable<Readonly<Record<string, string>>>((f) => JSON.stringify(Object.entries(f)));
  // Positions and revisions are numbers while safe integers (a state's are never past the snapshot's
  // position); past 2^53 — never, in practice — the whole column is written as decimal strings.
  const bigAsString = position > BigInt(Number.MAX_SAFE_INTEGER);
  const bigValue = (v: bigint): number | string => (bigAsString ? v.toString() : Number(v));
  // A time equal to the report's is written as `true`: one string fewer to write and to read back.
  const sameAsReport = (s: NodeState, t: string | null): string | null | true => (t !== null && t === s.reported?.receivedAt ? true : t);
  const pick: Record<ColumnName, (s: NodeState) => unknown> = {
    node: (s) => s.node,
    status: (s) => nodeStatuses.indexOf(s.status),
    caughtUp: (s) => s.caughtUp,
    sentDigest: (s) => s.sent?.digest ?? null,
    sentSpec: (s) => (s.sent === null ? -1 : specs.indexOf(s.sent.specDigest)),
    sentSerial: (s) => s.sent?.serial ?? 0,
    sentAt: (s) => s.sent?.sentAt ?? null,
    sentResources: (s) => (s.sent === null ? -1 : lists.indexOf(s.sent.resourceIds)),
    sentAcknowledgedAt: (s) => sameAsReport(s, s.sent?.acknowledgedAt ?? null),
    receivedAt: (s) => s.reported?.receivedAt ?? null,
    declared: (s) => (s.reported === null ? null : s.sent !== null && s.reported.declared === s.sent.digest ? true : s.reported.declared),
    class: (s) => (s.reported === null ? -1 : reportClasses.indexOf(s.reported.class)),
    applied: (s) => (s.reported === null ? -1 : lists.indexOf(s.reported.applied)),
    failed: (s) => (s.reported === null ? -1 : failures.indexOf(s.reported.failed)),
    refused: (s) => s.reported?.refused ?? '',
    reportedCarried: (s) => (s.reported === null ? -1 : ports.indexOf(s.reported.carried)),
    missing: (s) => lists.indexOf(s.missing),
    carried: (s) => ports.indexOf(s.carried),
    lastSeenAt: (s) => sameAsReport(s, s.lastSeenAt),
    stale: (s) => s.anomalies.stale,
    unknown: (s) => s.anomalies.unknown,
    undeclared: (s) => s.anomalies.undeclared,
    lastLatencyMs: (s) => s.convergence.lastLatencyMs,
    recentLatenciesMs: (s) => s.convergence.recentLatenciesMs,
    acknowledged: (s) => s.convergence.acknowledged,
    superseded: (s) => s.convergence.superseded,
    earlierSends: (s) => s.earlierSends,
    reports: (s) => s.reports,
    lastReportId: (s) => s.lastReportId,
    position: (s) => bigValue(s.position),
    revision: (s) => bigValue(s.revision),
  };
  return {
    values(name, from, to) {
      const f = pick[name];
      const out = new Array<unknown>(to - from);
      for (let i = from; i < to; i++) out[i - from] = f(states[i]!);
      return out;
    },
    table(name) {
      switch (name) {
        case 'specs':
          return specs.values;
        case 'lists':
          return lists.values;
        case 'ports':
          return ports.values;
        case 'failures':
          return failures.values.map((f) => Object.entries(f));
      }
    },
  };
}

// ------------------------------------------------------------------ format 5: binary parts

/** How a part's bytes are read. */
export const partKinds = ['i8', 'i32', 'f64', 'bool', 'utf8', 'hex', 'json'] as const;
export type PartKind = (typeof partKinds)[number];
export type Part = Readonly<{ name: string; kind: PartKind; bytes: Buffer }>;

/** The shape a column's values take, which decides its binary parts. */
type Shape = 'string' | 'number' | 'boolean' | 'numbers' | 'sends';
const shapes: Record<ColumnName, Shape> = {
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

const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
/** A string's length in a `string` part's lengths: -1 is null, -2 is `true` (the same as the report's). */
const nullLength = -1;
const trueLength = -2;

const jsonPart = (name: string, values: unknown): Part => ({ name, kind: 'json', bytes: Buffer.from(JSON.stringify(values), 'utf8') });

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

// ------------------------------------------------------------------ format 5, slice by slice

// encodeColumn over a 100,000-node column held the event loop 16–110 ms (one typed array, one
// joined text, one JSON.stringify per column). encodeColumnSliced makes the same bytes a slice of
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

type PartReader = Readonly<{ take: (name: string) => Part | undefined }>;

/** A part as numbers (a typed array over the file's bytes where aligned, a copy otherwise). */
function numbersOf(p: Part): ArrayLike<number> {
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

function parseJson(p: Part): unknown {
  try {
    return JSON.parse(p.bytes.toString('utf8'));
  } catch (e) {
    throw new SnapshotContentError(`part ${p.name} is not JSON: ${(e as Error).message}`);
  }
}

const none: readonly never[] = Object.freeze([]);

/** Strings from a lengths part and its text: sliced from one string per column, not made one by one. */
function stringsOf(lengths: Part, text: Part | undefined, name: string): (string | null | true)[] {
  if (text === undefined || (text.kind !== 'utf8' && text.kind !== 'hex')) throw new SnapshotContentError(`${name}: no text part`);
  const ls = numbersOf(lengths);
  const bytes = text.bytes;
  if (text.kind === 'hex') return digestsOf(ls, bytes, name);
  // ASCII text (times, digests, ids): each string made flat from its bytes. Slices of one string
  // per column were faster to make but took 8 bytes more each and held the column's whole text
  // (+8 MB of heap at 100,000 nodes). Other text is sliced from the decoded column.
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
function listsOf<T>(counts: ArrayLike<number>, values: ArrayLike<T>, name: string, make: (at: number) => T): T[][] {
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
 * A string column read where it lies (issue 10: warm start): the lengths, where each value
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
 * form), which the caller parses with Date.parse itself. test/readModel/lazyRestore.property.test.ts
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
        const lazy = TextColumn.of(ds, digestsText, `${name}.digests`);
        const counts = numbersOf(main);
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
  for (let i = 0; i < xs.length; i++) if (!(xs[i]! >= min && xs[i]! < Infinity)) return false;
  return true;
};
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
/** Lowercase hex bytes only: a loop over the bytes (a regex over the text cost 30 ms at 100,000 digests). */
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

// ------------------------------------------------------------------ decoding

const noAnomalies: Anomalies = Object.freeze({ stale: 0, unknown: 0, undeclared: 0 });
/** Revisions are small: one bigint each for the first few thousand, as a fold would make them anew (cheaper, and less heap). */
const smallBigs = Array.from({ length: 4_097 }, (_, i) => BigInt(i - 1));
const toBig = (v: number | string): bigint => (typeof v === 'number' && v >= -1 && v < 4_096 ? smallBigs[v + 1]! : BigInt(v));

/** A string column's values as tags, without making the strings: -1 null, -2 true, ≥ 0 a string (its length, or 0). */
const tagsOf = (c: Column<string | null | true>): ArrayLike<number> => {
  if (c instanceof TextColumn) return c.lengths;
  const tags = new Int8Array(c.length);
  for (let i = 0; i < c.length; i++) {
    const v = c.at(i);
    tags[i] = v === null ? nullLength : v === true ? trueLength : 0;
  }
  return tags;
};
const timeOf = (c: Column<string | null | true>, i: number): number => {
  if (c instanceof TextColumn) return c.timeAt(i);
  const v = c.at(i);
  return typeof v === 'string' ? Date.parse(v) : NaN;
};

/**
 * What the read model's counters read of a node (fleetTally.ts: status, caughtUp, the send's
 * spec, convergence, anomalies), filled in place for node i without building its state. Only
 * those fields are right: it is handed to FleetTally.add and to nothing else.
 */
export type CountedState = NodeState;

/**
 * The trust checks' view of node i (snapshotTrust.ts), filled in place without building its
 * state: what statusOf reads of its send and report, as table indices, and the fields it must agree with.
 */
export type StateFacts = {
  status: NodeStatus;
  caughtUp: boolean;
  sent: boolean;
  reported: boolean;
  /** The report names the send's digest (statusOf's caughtUp). */
  declaredIsSent: boolean;
  refused: boolean;
  /** Indices in the lists table (the send's resources, the report's applied) and the failures table. */
  resources: number;
  applied: number;
  failed: number;
  missing: readonly string[];
  carried: readonly number[];
  reportedCarried: readonly number[];
  reports: number;
  position: number | string;
};

/**
 * A snapshot's node states, checked and read in place (issue 10: warm start): node ids and their
 * slots are made at once, a node's state (NodeState, sharing the tables' values as the fold
 * shares them) only when `state(i)` builds it. The read model keeps what it builds
 * (ReadModel.restore); `state` makes a new object at each call.
 */
export type DecodedStates = Readonly<{
  length: number;
  /** Node ids in file order. */
  nodes: string[];
  /** Node id → its index. */
  slots: Map<string, number>;
  state: (i: number) => NodeState;
  status: (i: number) => NodeStatus;
  /** The last-seen time as Date.parse gives it (NaN: never seen). */
  lastSeenMs: (i: number) => number;
  /** See CountedState: one object, refilled at each call. */
  counted: (i: number) => CountedState;
  /** See StateFacts: one object, refilled at each call. */
  facts: (i: number) => StateFacts;
}>;

/**
 * Checked columns and tables as states read in place; an index outside its table, a value that
 * contradicts another column or a column of another length throws SnapshotContentError — all
 * checked here, before any state is built.
 */
export function decodeStates(n: number, s: Columns, t: Tables): DecodedStates {
  for (const name of columnNames) {
    if (s[name].length !== n) throw new SnapshotContentError(`column ${name} has ${s[name].length} values for ${n} nodes`);
  }
  // One object per table entry, shared by every node that names it (as the fold shares them).
  const lists = t.lists.map((l) => (l.length === 0 ? none : l));
  const ports = t.ports.map((l) => (l.length === 0 ? none : l));
  const failures = t.failures.map((f) => Object.freeze(Object.fromEntries(f)) as Readonly<Record<string, string>>);
  const convergenceZero: NodeState['convergence'] = Object.freeze({
    lastLatencyMs: null,
    recentLatenciesMs: none,
    acknowledged: 0,
    superseded: 0,
  });
  const outside = (node: string, what: string, i: number): never => {
    throw new SnapshotContentError(`node ${JSON.stringify(node)}: ${what} index ${i} is outside its table`);
  };
  const within = (size: number, i: number, what: string, node: string): void => {
    if (!(i >= 0 && i < size)) outside(node, what, i);
  };
  const nodes = new Array<string>(n);
  const slots = new Map<string, number>();
  // The loops over every node (the checks here, the counters, the trust checks) index arrays.
  const sentTags = tagsOf(s.sentDigest);
  const receivedTags = tagsOf(s.receivedAt);
  const seenTags = tagsOf(s.lastSeenAt);
  const declaredTags = tagsOf(s.declared);
  const status = valuesOf(s.status);
  const caughtUp = valuesOf(s.caughtUp);
  const sentSpec = valuesOf(s.sentSpec);
  const sentResources = valuesOf(s.sentResources);
  const applied = valuesOf(s.applied);
  const failed = valuesOf(s.failed);
  const reportedCarried = valuesOf(s.reportedCarried);
  const missing = valuesOf(s.missing);
  const carried = valuesOf(s.carried);
  const stale = valuesOf(s.stale);
  const unknown = valuesOf(s.unknown);
  const undeclared = valuesOf(s.undeclared);
  const acknowledged = valuesOf(s.acknowledged);
  const superseded = valuesOf(s.superseded);
  const reports = valuesOf(s.reports);
  {
    const sentAtTags = tagsOf(s.sentAt);
    const ackTags = tagsOf(s.sentAcknowledgedAt);
    const cls = valuesOf(s.class);
    // Every check the states' building relies on, node by node in the order the fields are built.
    for (let i = 0; i < n; i++) {
      const node = s.node.at(i);
      slots.set(node, i);
      if (slots.size !== i + 1) throw new SnapshotContentError(`node ${JSON.stringify(node)} appears twice`);
      nodes[i] = node;
      const hasSent = sentTags[i] !== nullLength;
      const hasReport = receivedTags[i] !== nullLength;
      if (hasSent) {
        if (sentAtTags[i] === nullLength) throw new SnapshotContentError(`node ${JSON.stringify(node)}: a send without sentAt`);
        if (ackTags[i] === trueLength && !hasReport)
          throw new SnapshotContentError(`node ${JSON.stringify(node)}: acknowledged by a report it does not have`);
        within(t.specs.length, sentSpec[i]!, 'spec', node);
        within(lists.length, sentResources[i]!, 'resource list', node);
      }
      if (hasReport) {
        if (reportClasses[cls[i]!] === undefined) throw new SnapshotContentError(`node ${JSON.stringify(node)}: a report without a class`);
        if (declaredTags[i] === trueLength && !hasSent)
          throw new SnapshotContentError(`node ${JSON.stringify(node)}: a report names a send it does not have`);
        within(lists.length, applied[i]!, 'applied list', node);
        within(failures.length, failed[i]!, 'failure map', node);
        within(ports.length, reportedCarried[i]!, 'port list', node);
      }
      if (seenTags[i] === trueLength && !hasReport)
        throw new SnapshotContentError(`node ${JSON.stringify(node)}: last seen at a report it does not have`);
      within(lists.length, missing[i]!, 'missing list', node);
      within(ports.length, carried[i]!, 'port list', node);
    }
  }

  function sentOf(i: number): SentSummary | null {
    const digest = s.sentDigest.at(i);
    if (digest === null) return null;
    const ack = s.sentAcknowledgedAt.at(i);
    return {
      digest,
      specDigest: t.specs[s.sentSpec.at(i)]!,
      serial: s.sentSerial.at(i),
      sentAt: s.sentAt.at(i)!,
      resourceIds: lists[s.sentResources.at(i)]!,
      // The same string as the report's time when they are equal, as the fold holds them.
      acknowledgedAt: ack === true ? s.receivedAt.at(i)! : ack,
    };
  }

  function state(i: number): NodeState {
    const node = nodes[i]!;
    const sent = sentOf(i);
    const receivedAt = s.receivedAt.at(i);
    let reported: ReportedSummary | null = null;
    if (receivedAt !== null) {
      const declared = s.declared.at(i);
      reported = {
        declared: declared === true ? sent!.digest : declared,
        receivedAt,
        applied: lists[s.applied.at(i)]!,
        failed: failures[s.failed.at(i)]!,
        refused: s.refused.at(i),
        carried: ports[s.reportedCarried.at(i)]!,
        class: reportClasses[s.class.at(i)]!,
      };
    }
    const stale = s.stale.at(i);
    const unknown = s.unknown.at(i);
    const undeclared = s.undeclared.at(i);
    const lastLatencyMs = s.lastLatencyMs.at(i);
    const recent = s.recentLatenciesMs.at(i);
    const acknowledged = s.acknowledged.at(i);
    const superseded = s.superseded.at(i);
    const earlier = s.earlierSends.at(i);
    const seen = s.lastSeenAt.at(i);
    return {
      node,
      status: nodeStatuses[s.status.at(i)]!,
      caughtUp: s.caughtUp.at(i),
      sent,
      reported,
      missing: lists[s.missing.at(i)]!,
      carried: ports[s.carried.at(i)]!,
      lastSeenAt: seen === true ? receivedAt : seen,
      anomalies: stale === 0 && unknown === 0 && undeclared === 0 ? noAnomalies : { stale, unknown, undeclared },
      convergence:
        lastLatencyMs === null && recent.length === 0 && acknowledged === 0 && superseded === 0
          ? convergenceZero
          : { lastLatencyMs, recentLatenciesMs: recent.length === 0 ? none : recent, acknowledged, superseded },
      earlierSends: earlier.length === 0 ? none : (earlier as EarlierSend[]),
      reports: s.reports.at(i),
      lastReportId: s.lastReportId.at(i),
      position: toBig(s.position.at(i)),
      revision: toBig(s.revision.at(i)),
    };
  }

  // The counters' view, refilled in place: no object per node (lastLatencyMs is not counted).
  const one = [0];
  const countedSent = { specDigest: '' };
  const counted = {
    status: 'undeclared' as NodeStatus,
    caughtUp: false,
    sent: null as { specDigest: string } | null,
    convergence: { recentLatenciesMs: none as readonly number[], acknowledged: 0, superseded: 0 },
    anomalies: { stale: 0, unknown: 0, undeclared: 0 },
  };
  const recent = s.recentLatenciesMs;
  function countedAt(i: number): CountedState {
    counted.status = nodeStatuses[status[i]!]!;
    counted.caughtUp = caughtUp[i]!;
    if (sentTags[i] === nullLength) counted.sent = null;
    else {
      countedSent.specDigest = t.specs[sentSpec[i]!]!;
      counted.sent = countedSent;
    }
    const c = counted.convergence;
    if (recent instanceof NumberListColumn && recent.counts[i]! <= 1) {
      if (recent.counts[i] === 0) c.recentLatenciesMs = none;
      else {
        one[0] = recent.flat[recent.starts[i]!]!;
        c.recentLatenciesMs = one;
      }
    } else c.recentLatenciesMs = recent.at(i);
    c.acknowledged = acknowledged[i]!;
    c.superseded = superseded[i]!;
    const a = counted.anomalies;
    a.stale = stale[i]!;
    a.unknown = unknown[i]!;
    a.undeclared = undeclared[i]!;
    return counted as unknown as CountedState;
  }

  const facts: StateFacts = {
    status: 'undeclared',
    caughtUp: false,
    sent: false,
    reported: false,
    declaredIsSent: false,
    refused: false,
    resources: -1,
    applied: -1,
    failed: -1,
    missing: none,
    carried: none,
    reportedCarried: none,
    reports: 0,
    position: 0,
  };
  const refusedLengths = s.refused instanceof TextColumn ? s.refused.lengths : null;
  const position = valuesOf(s.position);
  function factsAt(i: number): StateFacts {
    facts.status = nodeStatuses[status[i]!]!;
    facts.caughtUp = caughtUp[i]!;
    facts.sent = sentTags[i] !== nullLength;
    facts.reported = receivedTags[i] !== nullLength;
    facts.resources = facts.sent ? sentResources[i]! : -1;
    if (facts.reported) {
      const declared = declaredTags[i]!;
      // `true` is the send's digest; a digest written out is compared as a string (a stale report, or a file not of this writer).
      facts.declaredIsSent = facts.sent && (declared === trueLength || (declared >= 0 && s.declared.at(i) === s.sentDigest.at(i)));
      facts.refused = refusedLengths === null ? s.refused.at(i) !== '' : refusedLengths[i]! > 0;
      facts.applied = applied[i]!;
      facts.failed = failed[i]!;
      facts.reportedCarried = ports[reportedCarried[i]!]!;
    } else {
      facts.declaredIsSent = false;
      facts.refused = false;
      facts.applied = -1;
      facts.failed = -1;
      facts.reportedCarried = none;
    }
    facts.missing = lists[missing[i]!]!;
    facts.carried = ports[carried[i]!]!;
    facts.reports = reports[i]!;
    facts.position = position[i]!;
    return facts;
  }

  const lastSeenMs = (i: number): number => {
    const tag = seenTags[i];
    if (tag === nullLength) return NaN;
    return tag === trueLength ? timeOf(s.receivedAt, i) : timeOf(s.lastSeenAt, i);
  };

  return {
    length: n,
    nodes,
    slots,
    state,
    status: (i) => nodeStatuses[status[i]!]!,
    lastSeenMs,
    counted: countedAt,
    facts: factsAt,
  };
}
