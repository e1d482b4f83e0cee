import { createHash } from 'node:crypto';
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { brotliCompress, brotliDecompressSync, constants as z } from 'node:zlib';
import { ConvergeError } from '../../core/errors.ts';

// An archive segment (docs/operations.md "Retention and archive"): one brotli-compressed file of
// events moved out of the hot store, self-describing so it can be checked without the store. A
// header line (JSON) says what it holds and the sha256 of everything after it; then one line per
// event, a JSON array of the row exactly as stored (data and metadata as their stored text, the
// leaf hash as hex), so `converge audit verify` recomputes each leaf from the archive alone.

export const segmentFormat = 'converge-archive-segment';
export const segmentVersion = 1;

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

export type SegmentHeader = Readonly<{
  format: typeof segmentFormat;
  version: number;
  /** The store's identity (SQLite: store_identity, made by the schema v6 migration). */
  store: string;
  from: string;
  to: string;
  count: number;
  firstTime: string | null;
  lastTime: string | null;
  /** sha256 of the uncompressed body: every byte after the header line's newline. */
  sha256: string;
}>;

/**
 * Brotli quality 4: on bench/history's segments (73 MB of lines) it was the smallest of the fast
 * settings (16.5 MB in 2.7 s, where gzip -6 gave 18.1 MB in 1.8 s and quality 5 17.1 MB in 12 s);
 * quality 11 saves another 13 % at 160 times the time (docs/operations.md "Retention and archive").
 */
export const brotliQuality = 4;

const pad = (p: bigint): string => p.toString().padStart(16, '0');
/** `events-<from>-<to>.ndjson.br`, positions zero-padded so names sort as their ranges do. */
export const segmentFileName = (from: bigint, to: bigint): string => `events-${pad(from)}-${pad(to)}.ndjson.br`;
export const segmentFilePattern = /^events-(\d{16})-(\d{16})\.ndjson\.br$/;

const rowLine = (r: ArchivedRow): string =>
  JSON.stringify([r.position.toString(), r.stream, r.revision.toString(), r.type, r.data, r.metadata, r.time, r.id, r.leaf]);

export type EncodedSegment = Readonly<{ name: string; header: SegmentHeader; bytes: Buffer; rawBytes: number }>;

/** The segment's bytes, compressed. Rows in position order, at least one. */
export async function encodeSegment(store: string, rows: readonly ArchivedRow[]): Promise<EncodedSegment> {
  const first = rows[0]!;
  const last = rows[rows.length - 1]!;
  const body = rows.map((r) => `${rowLine(r)}\n`).join('');
  let firstTime: string | null = null;
  let lastTime: string | null = null;
  for (const r of rows) {
    if (r.time === null) continue;
    if (firstTime === null || r.time < firstTime) firstTime = r.time;
    if (lastTime === null || r.time > lastTime) lastTime = r.time;
  }
  const header: SegmentHeader = {
    format: segmentFormat,
    version: segmentVersion,
    store,
    from: first.position.toString(),
    to: last.position.toString(),
    count: rows.length,
    firstTime,
    lastTime,
    sha256: createHash('sha256').update(body).digest('hex'),
  };
  const raw = Buffer.from(`${JSON.stringify(header)}\n${body}`, 'utf8');
  const bytes = await promisify(brotliCompress)(raw, {
    params: { [z.BROTLI_PARAM_QUALITY]: brotliQuality, [z.BROTLI_PARAM_SIZE_HINT]: raw.length, [z.BROTLI_PARAM_MODE]: z.BROTLI_MODE_TEXT },
  });
  return { name: segmentFileName(first.position, last.position), header, bytes, rawBytes: raw.length };
}

/** Test hook (CONVERGE_TEST_ARCHIVE_PAUSE): the archive crash test stops a move here and SIGKILLs it. */
export type PauseAt = (phase: string) => void;

/**
 * Put the segment in `dir` whole or not at all: a temporary name, fsync, rename, fsync of the
 * folder, so after a crash the file under its own name is complete and on disk.
 */
export function writeSegmentFile(dir: string, seg: EncodedSegment, pause: PauseAt = () => {}): string {
  const path = join(dir, seg.name);
  const tmp = `${path}.tmp`;
  writeFileSync(tmp, seg.bytes);
  const fd = openSync(tmp, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  pause('temp-written');
  renameSync(tmp, path);
  syncDir(dir);
  pause('renamed');
  return path;
}

export function syncDir(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

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

export type DecodedSegment = Readonly<{ header: SegmentHeader; rows: ArchivedRow[]; rawBytes: number }>;

/**
 * Read and check a segment: its header, the sha256 of its body, its count and that positions rise.
 * `expect` (the store's manifest row) must match too. Throws SegmentError.
 */
export function readSegmentFile(path: string, name: string, expect?: Readonly<{ sha256: string; count: number }>): DecodedSegment {
  let compressed: Buffer;
  try {
    compressed = readFileSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new SegmentError(name, 'missing', 'no such file');
    throw new SegmentError(name, 'missing', (err as Error).message);
  }
  let text: string;
  try {
    text = brotliDecompressSync(compressed).toString('utf8');
  } catch (err) {
    throw new SegmentError(name, 'changed', `not brotli: ${(err as Error).message}`);
  }
  const nl = text.indexOf('\n');
  let header: SegmentHeader;
  try {
    header = JSON.parse(text.slice(0, nl)) as SegmentHeader;
  } catch {
    throw new SegmentError(name, 'changed', 'its header line is not JSON');
  }
  if (header.format !== segmentFormat || header.version !== segmentVersion)
    throw new SegmentError(
      name,
      'changed',
      `format ${String(header.format)} v${String(header.version)}, not ${segmentFormat} v${segmentVersion}`,
    );
  const body = text.slice(nl + 1);
  const sha = createHash('sha256').update(body).digest('hex');
  if (sha !== header.sha256) throw new SegmentError(name, 'changed', `its body's sha256 is ${sha}, its header says ${header.sha256}`);
  if (expect !== undefined && expect.sha256 !== sha)
    throw new SegmentError(name, 'changed', `sha256 ${sha}, the store's manifest says ${expect.sha256}`);
  const rows: ArchivedRow[] = [];
  for (const line of body.split('\n')) {
    if (line === '') continue;
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
    rows.push({ position: BigInt(position), stream, revision: BigInt(revision), type, data, metadata, time, id, leaf });
  }
  const count = expect?.count ?? header.count;
  if (rows.length !== header.count || rows.length !== count)
    throw new SegmentError(name, 'changed', `${rows.length} events, header ${header.count}, manifest ${count}`);
  for (let i = 1; i < rows.length; i++)
    if (rows[i]!.position <= rows[i - 1]!.position)
      throw new SegmentError(name, 'changed', `positions out of order at ${rows[i]!.position}`);
  return { header, rows, rawBytes: Buffer.byteLength(text, 'utf8') };
}
