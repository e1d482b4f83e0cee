import { constants as z } from 'node:zlib';
import { ConvergeError } from '../../core/errors.ts';

// What both versions of an archive segment share (docs/operations.md "Retention and archive"):
// the row as the store held it, the line it is written as, the file's name, and the error a
// segment that is gone or not what was archived raises. The versions: segmentV1.ts (one brotli
// stream, rows in position order) and segmentV2.ts (a plain header with a block table, then
// blocks compressed one by one, rows in stream order), read through segment.ts.

export const segmentFormat = 'converge-archive-segment';

/** One event as the store held it. Positions and revisions are decimal strings in the file, bigints here. */
export type ArchivedRow = Readonly<{
  position: bigint;
  id: string;
  stream: string;
  revision: bigint;
  type: string;
  /** The stored JSON text of the data and the metadata. */
  data: string;
  metadata: string;
  /** The time the event carries (eventTimeField), as stored; null if it carries none. */
  time: string | null;
  /** The leaf hash stored beside the row, hex; null if the row had none. */
  leaf: string | null;
}>;

/** The header fields both versions carry. */
export type SegmentHeaderBase = Readonly<{
  format: typeof segmentFormat;
  version: number;
  /** The store's identity (SQLite: store_identity, made by the schema v6 migration). */
  store: string;
  from: string;
  to: string;
  count: number;
  firstTime: string | null;
  lastTime: string | null;
  /** What the store's manifest records: v1, of the body; v2, of the block table (segmentV2.ts). */
  sha256: string;
}>;

/**
 * Brotli quality 4: on bench/history's segments (73 MB of lines) it was the smallest of the fast
 * settings (16.5 MB in 2.7 s, where gzip -6 gave 18.1 MB in 1.8 s and quality 5 17.1 MB in 12 s);
 * quality 11 saves another 13 % at 160 times the time (docs/operations.md "Retention and archive").
 */
export const brotliQuality = 4;
export const brotliParams = (size: number) => ({
  params: { [z.BROTLI_PARAM_QUALITY]: brotliQuality, [z.BROTLI_PARAM_SIZE_HINT]: size, [z.BROTLI_PARAM_MODE]: z.BROTLI_MODE_TEXT },
});

const pad = (p: bigint): string => p.toString().padStart(16, '0');
/** `events-<from>-<to>.ndjson.br`, positions zero-padded so names sort as their ranges do. */
export const segmentFileName = (from: bigint, to: bigint): string => `events-${pad(from)}-${pad(to)}.ndjson.br`;
export const segmentFilePattern = /^events-(\d{16})-(\d{16})\.ndjson\.br$/;

/** A row as one line of JSON (no newline): `[position, stream, revision, type, data, metadata, time, id, leaf]`. */
export const rowLine = (r: ArchivedRow): string =>
  JSON.stringify([r.position.toString(), r.stream, r.revision.toString(), r.type, r.data, r.metadata, r.time, r.id, r.leaf]);

export function parseRowLine(line: string): ArchivedRow {
  const [position, stream, revision, type, data, metadata, time, id, leaf] = JSON.parse(line) as [
    string,
    string,
    string,
    string,
    string,
    string,
    string | null,
    string,
    string | null,
  ];
  return { position: BigInt(position), stream, revision: BigInt(revision), type, data, metadata, time, id, leaf };
}

/** The earliest and latest time the rows carry. */
export function timeRange(rows: readonly ArchivedRow[]): { firstTime: string | null; lastTime: string | null } {
  let firstTime: string | null = null;
  let lastTime: string | null = null;
  for (const r of rows) {
    if (r.time === null) continue;
    if (firstTime === null || r.time < firstTime) firstTime = r.time;
    if (lastTime === null || r.time > lastTime) lastTime = r.time;
  }
  return { firstTime, lastTime };
}

export type EncodedSegment = Readonly<{ name: string; header: SegmentHeaderBase; bytes: Buffer; rawBytes: number }>;

/** What is wrong with a segment file: gone, or its bytes are not what was archived. */
export type SegmentProblem = 'missing' | 'changed';

export class SegmentError extends ConvergeError {
  constructor(
    readonly file: string,
    readonly problem: SegmentProblem,
    why: string,
  ) {
    super('CONVERGE_ERR_STORE_UNAVAILABLE', `archive segment ${file} is ${problem}: ${why}`, { details: { file, problem } });
  }
}

/** What the store's manifest says of a segment, checked against the file. */
export type SegmentExpect = Readonly<{ sha256: string; count: number }>;

/** A whole segment's rows, in position order, checked: the count the header and manifest say, no position twice. */
export function checkedRows(name: string, rows: ArchivedRow[], header: SegmentHeaderBase, expect?: SegmentExpect): ArchivedRow[] {
  const count = expect?.count ?? header.count;
  if (rows.length !== header.count || rows.length !== count)
    throw new SegmentError(name, 'changed', `${rows.length} events, header ${header.count}, manifest ${count}`);
  for (let i = 1; i < rows.length; i++)
    if (rows[i]!.position <= rows[i - 1]!.position)
      throw new SegmentError(name, 'changed', `positions out of order at ${rows[i]!.position}`);
  return rows;
}
