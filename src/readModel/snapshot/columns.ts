import { z } from 'zod';
import { nodeStatuses, reportClasses } from '../../../projections/index.ts';

// The read-model snapshot's body: the node states as columns, one per field, with the values
// many nodes share — spec digests, resource-id lists, port lists, failure maps — written once in
// tables and named by index. The fold shares those values between nodes in memory; decoding puts
// the sharing back (one object per table entry), so a restored model takes no more heap than a
// folded one.
//
// This file names the columns and tables and says what each value must be. The other files of
// this folder, in the order a snapshot goes through them:
//   encoder.ts            node states → one column's values, and the shared tables;
//   columnParts.ts        format 5: a column's values → binary parts (columnPartsSliced.ts: the
//                         same bytes a slice at a time, for the writer);
//   binaryPartsV5.ts      format 5: a file's framed parts back (jsonLinesV4.ts: format 4, one JSON
//                         line per column, still read);
//   columnsInPlace.ts,    parts → checked columns, strings and lists read where they lie;
//   decodeColumn.ts
//   decodeStates.ts       checked columns and tables → node states, built when first asked;
//   snapshotFile.ts       the file: header, parts, checksum; read, open, write;
//   trust.ts              whether a decoded snapshot is believed (consistency, store identity, cross-check).
//
// Format 5 writes each column as binary parts: numbers as little-endian typed arrays (int8, int32
// or float64, the narrowest that holds the column), booleans as bytes, strings as their lengths
// plus one UTF-8 text, lists as counts plus the flattened values. Restoring reads typed arrays and
// slices one string per column: no JSON.parse per node (format 4's JSON array per column was the
// restore's main cost in time and garbage). A column holding a value its binary form cannot carry
// exactly (a string where a count belongs, a lone surrogate, a position past 2^53) is written as
// JSON instead, and the checks below refuse or accept it as they would any value.
//
// Every column is checked value by value — a snapshot once trusted blindly brought back a string
// where a number belongs as "reports":"NaN111" — so a value of the wrong type or out of range
// refuses the whole snapshot.

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
  'retiredAt',
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
/** 64 lowercase hex characters; a loop, not a regex (the regex was a visible share of a restore). */
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
  retiredAt: nullable(text),
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
 * column are made from the file's bytes only then (a warm start reads no more than it must), others are read from
 * an array or a typed array.
 */
export type Column<T> = Readonly<{ length: number; at: (i: number) => T }>;
/** Decoded, checked columns. */
export type Columns = { [K in ColumnName]: Column<ValueOf<(typeof columnChecks)[K]>> };
/** A column over an array or a typed array. */
export const arrayColumn = <T>(values: ArrayLike<T>): Column<T> => ({ length: values.length, at: (i) => values[i]!, values }) as Column<T>;
/** A column's values as an array to index in a loop over every node (a call per value costs far more than an index, cold). */
export const valuesOf = <T>(c: Column<T>): ArrayLike<T> =>
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
  // check (a call per value, slow over a large snapshot) runs only to name a failure.
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
