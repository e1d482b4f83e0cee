import { z } from 'zod';
import { nodeStatuses, reportClasses } from '../../projections/index.ts';
import type { Anomalies, EarlierSend, NodeState, ReportedSummary, SentSummary } from '../../projections/index.ts';

// The read-model snapshot's body (format 4): the node states as columns, one JSON array per
// field, with the values many nodes share — spec digests, resource-id lists, port lists, failure
// maps — written once in tables and named by index. The fold shares those values between nodes
// in memory; the old format wrote each node's copy out in full with its keys (89 MB at 100,000
// nodes) and read every copy back as its own object (291 MiB of heap against 177 MiB folded).
// Decoding puts the sharing back: one object per table entry, as the fold holds them.
//
// Every section has a zod schema (issue 13 item 3: a snapshot was trusted blindly, and a string
// where a number belongs came back as "reports":"NaN111"), so a value of the wrong type or out
// of range refuses the whole snapshot.

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
export type SectionName = (typeof sectionNames)[number];

// A column is one zod schema run once over the whole array with a plain loop per element: zod's
// per-element schemas (z.array(z.number().int())) cost ~0.5 µs a value, 1.7 s for a 100,000-node
// snapshot, more than folding from zero is worth. The failing index is in the issue's path.
type Check<T> = Readonly<{ what: string; ok: (v: unknown) => v is T }>;
const column = <T>(c: Check<T>) =>
  z.any().superRefine((v, ctx) => {
    if (!Array.isArray(v)) {
      ctx.addIssue({ code: 'custom', message: `expected an array of ${c.what}` });
      return;
    }
    for (let i = 0; i < v.length; i++) {
      if (!c.ok(v[i])) {
        ctx.addIssue({
          code: 'custom',
          message: `expected ${c.what}, got ${JSON.stringify(v[i])?.slice(0, 80) ?? String(v[i])}`,
          path: [i],
        });
        return;
      }
    }
  }) as unknown as z.ZodType<T[]>;

const hex64 = /^[0-9a-f]{64}$/;
const isInt = (v: unknown, min: number, max = Number.MAX_SAFE_INTEGER): v is number =>
  typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max;
const isDigest = (v: unknown): v is string => typeof v === 'string' && v.length === 64 && hex64.test(v);
const isText = (v: unknown): v is string => typeof v === 'string';
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
const text: Check<string> = { what: 'a string', ok: isText };
const nonEmpty: Check<string> = { what: 'a non-empty string', ok: (v): v is string => typeof v === 'string' && v.length > 0 };
/** 64-bit positions: numbers while they are safe integers, the whole column as decimal strings beyond. */
const bigColumn = (min: number) =>
  z.union([
    column<number>({ what: `a whole number ≥ ${min}`, ok: (v): v is number => isInt(v, min) }),
    column<string>({ what: 'a decimal string', ok: (v): v is string => typeof v === 'string' && /^-?\d{1,20}$/.test(v) }),
  ]);

export const sectionSchemas = {
  node: column(nonEmpty),
  status: column<number>({ what: 'a status index', ok: (v): v is number => isInt(v, 0, nodeStatuses.length - 1) }),
  caughtUp: column<boolean>({ what: 'a boolean', ok: (v): v is boolean => typeof v === 'boolean' }),
  sentDigest: column(nullable(digest)),
  sentSpec: column(index),
  sentSerial: column(count),
  sentAt: column(nullable(text)),
  sentResources: column(index),
  /** true: the same time as the report's `receivedAt` (the first matching report acknowledges its send). */
  sentAcknowledgedAt: column(sameAsReport),
  receivedAt: column(nullable(text)),
  /** true: the digest of `sent` (most reports name the latest send); null: a legacy report. */
  declared: column<true | null | string>({
    what: 'true, null or a digest',
    ok: (v): v is true | null | string => v === true || v === null || isDigest(v),
  }),
  class: column<number>({ what: 'a report class index or -1', ok: (v): v is number => isInt(v, -1, reportClasses.length - 1) }),
  applied: column(index),
  failed: column(index),
  refused: column(text),
  reportedCarried: column(index),
  missing: column(count),
  carried: column(count),
  lastSeenAt: column(sameAsReport),
  stale: column(count),
  unknown: column(count),
  undeclared: column(count),
  lastLatencyMs: column<number | null>({
    what: 'a latency ≥ 0 or null',
    ok: (v): v is number | null => v === null || (typeof v === 'number' && Number.isFinite(v) && v >= 0),
  }),
  recentLatenciesMs: column<number[]>({ what: 'a list of latencies ≥ 0', ok: (v): v is number[] => isNumbers(v, 0) }),
  acknowledged: column(count),
  superseded: column(count),
  earlierSends: column<[string, number][]>({
    what: 'a list of [digest, serial]',
    ok: (v): v is [string, number][] =>
      Array.isArray(v) && v.every((e) => Array.isArray(e) && e.length === 2 && isDigest(e[0]) && isInt(e[1], 0)),
  }),
  reports: column(count),
  lastReportId: column(nullable(nonEmpty)),
  position: bigColumn(0),
  revision: bigColumn(-1),
  specs: z.array(z.string().regex(hex64)),
  lists: z.array(z.array(z.string())),
  ports: z.array(z.array(z.number().int())),
  failures: z.array(z.array(z.tuple([z.string(), z.string()]))),
} satisfies Record<SectionName, z.ZodType>;

export type Sections = { [K in SectionName]: z.infer<(typeof sectionSchemas)[K]> };

export const headerSchema = z.strictObject({
  format: z.number().int(),
  foldVersion: z.number().int(),
  position: z.string().regex(/^\d{1,20}$/),
  eventId: z.string().min(1),
  writtenAt: z.string(),
  nodes: z.number().int().min(0),
  sections: z.array(z.string()),
});
export type Header = z.infer<typeof headerSchema>;

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
  /** The JSON text of one column over states [from, to), without the brackets. */
  column: (name: (typeof columnNames)[number], from: number, to: number) => string;
  /** A table's JSON text; complete once every column is encoded. */
  table: (name: (typeof tableNames)[number]) => string;
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
  const pick: Record<(typeof columnNames)[number], (s: NodeState) => unknown> = {
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
    column(name, from, to) {
      const f = pick[name];
      const out = new Array<unknown>(to - from);
      for (let i = from; i < to; i++) out[i - from] = f(states[i]!);
      const json = JSON.stringify(out);
      return json.slice(1, -1);
    },
    table(name) {
      switch (name) {
        case 'specs':
          return JSON.stringify(specs.values);
        case 'lists':
          return JSON.stringify(lists.values);
        case 'ports':
          return JSON.stringify(ports.values);
        case 'failures':
          return JSON.stringify(failures.values.map((f) => Object.entries(f)));
      }
    },
  };
}

// ------------------------------------------------------------------ decoding

export class SnapshotContentError extends Error {}

const none: readonly never[] = Object.freeze([]);
const noAnomalies: Anomalies = Object.freeze({ stale: 0, unknown: 0, undeclared: 0 });

/** States from validated sections; an index outside its table or a column of another length throws SnapshotContentError. */
export function decodeStates(header: Header, s: Sections): NodeState[] {
  const n = header.nodes;
  for (const name of columnNames) {
    if (s[name].length !== n) throw new SnapshotContentError(`column ${name} has ${s[name].length} values for ${n} nodes`);
  }
  const entry = <T>(table: readonly T[], i: number, what: string, node: string): T => {
    const v = table[i];
    if (v === undefined) throw new SnapshotContentError(`node ${JSON.stringify(node)}: ${what} index ${i} is outside its table`);
    return v;
  };
  // One object per table entry, shared by every node that names it (as the fold shares them).
  const lists = s.lists.map((l) => (l.length === 0 ? none : l));
  const ports = s.ports.map((l) => (l.length === 0 ? none : l));
  const failures = s.failures.map((f) => Object.freeze(Object.fromEntries(f)) as Readonly<Record<string, string>>);
  const convergenceZero: NodeState['convergence'] = Object.freeze({
    lastLatencyMs: null,
    recentLatenciesMs: none,
    acknowledged: 0,
    superseded: 0,
  });
  const bigs = (col: readonly (number | string)[]): bigint[] => col.map((v) => BigInt(v));
  const positions = bigs(s.position);
  const revisions = bigs(s.revision);
  const out = new Array<NodeState>(n);
  const nodes = new Set<string>();
  for (let i = 0; i < n; i++) {
    const node = s.node[i]!;
    if (nodes.has(node)) throw new SnapshotContentError(`node ${JSON.stringify(node)} appears twice`);
    nodes.add(node);
    const digestSent = s.sentDigest[i]!;
    let sent: SentSummary | null = null;
    if (digestSent !== null) {
      const sentAt = s.sentAt[i];
      if (sentAt === null || sentAt === undefined) throw new SnapshotContentError(`node ${JSON.stringify(node)}: a send without sentAt`);
      const ack = s.sentAcknowledgedAt[i]!;
      if (ack === true && s.receivedAt[i] === null)
        throw new SnapshotContentError(`node ${JSON.stringify(node)}: acknowledged by a report it does not have`);
      sent = {
        digest: digestSent,
        specDigest: entry(s.specs, s.sentSpec[i]!, 'spec', node),
        serial: s.sentSerial[i]!,
        sentAt,
        resourceIds: entry(lists, s.sentResources[i]!, 'resource list', node),
        // The same string as the report's time when they are equal, as the fold holds them.
        acknowledgedAt: ack === true ? s.receivedAt[i]! : ack,
      };
    }
    const receivedAt = s.receivedAt[i]!;
    let reported: ReportedSummary | null = null;
    if (receivedAt !== null) {
      const declared = s.declared[i]!;
      const cls = reportClasses[s.class[i]!];
      if (cls === undefined) throw new SnapshotContentError(`node ${JSON.stringify(node)}: a report without a class`);
      if (declared === true && sent === null)
        throw new SnapshotContentError(`node ${JSON.stringify(node)}: a report names a send it does not have`);
      reported = {
        declared: declared === true ? sent!.digest : declared,
        receivedAt,
        applied: entry(lists, s.applied[i]!, 'applied list', node),
        failed: entry(failures, s.failed[i]!, 'failure map', node),
        refused: s.refused[i]!,
        carried: entry(ports, s.reportedCarried[i]!, 'port list', node),
        class: cls,
      };
    }
    const stale = s.stale[i]!;
    const unknown = s.unknown[i]!;
    const undeclared = s.undeclared[i]!;
    const lastLatencyMs = s.lastLatencyMs[i]!;
    const recent = s.recentLatenciesMs[i]!;
    const acknowledged = s.acknowledged[i]!;
    const superseded = s.superseded[i]!;
    const earlier = s.earlierSends[i]!;
    const seen = s.lastSeenAt[i]!;
    if (seen === true && receivedAt === null)
      throw new SnapshotContentError(`node ${JSON.stringify(node)}: last seen at a report it does not have`);
    out[i] = {
      node,
      status: nodeStatuses[s.status[i]!]!,
      caughtUp: s.caughtUp[i]!,
      sent,
      reported,
      missing: entry(lists, s.missing[i]!, 'missing list', node),
      carried: entry(ports, s.carried[i]!, 'port list', node),
      lastSeenAt: seen === true ? receivedAt : seen,
      anomalies: stale === 0 && unknown === 0 && undeclared === 0 ? noAnomalies : { stale, unknown, undeclared },
      convergence:
        lastLatencyMs === null && recent.length === 0 && acknowledged === 0 && superseded === 0
          ? convergenceZero
          : { lastLatencyMs, recentLatenciesMs: recent.length === 0 ? none : recent, acknowledged, superseded },
      earlierSends: earlier.length === 0 ? none : (earlier as EarlierSend[]),
      reports: s.reports[i]!,
      lastReportId: s.lastReportId[i]!,
      position: positions[i]!,
      revision: revisions[i]!,
    };
  }
  return out;
}
