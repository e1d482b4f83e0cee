import { createHash } from 'node:crypto';
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { promisify } from 'node:util';
import { brotliCompress, brotliDecompressSync } from 'node:zlib';
import { SegmentError, brotliParams, parseRowLine, rowLine, segmentFileName, segmentFormat, timeRange } from './segmentFormat.ts';
import type { ArchivedRow, EncodedSegment, SegmentExpect, SegmentHeaderBase } from './segmentFormat.ts';
import type { RangeSummaryJson } from '../../core/audit/rangeSummary.ts';

// Segment format v2 (docs/operations.md "Retention and archive"): one node's history is read from
// the blocks that hold it, not the whole segment. The file is a header line of plain JSON, then
// brotli blocks, each compressed on its own. Rows are in (stream, type, position) order, so a stream's
// rows sit together in one block (two at most, for a stream longer than a block); the header's
// block table gives each block's first and last stream, its offset and size (from the byte after
// the header's newline), its count and the sha256 of its lines. Within a stream the lines go by
// type, then position: 3 % smaller than by position alone on bench/history. The header's `sha256`, the one the
// store's manifest records, is of the block table (its JSON text), so a read of one block is
// checked against the manifest: manifest → block table → block.

export const segmentV2 = 2;

/**
 * Uncompressed bytes per block, about (a block ends at the first stream boundary past this, or at
 * twice this). Smaller blocks make a stream's read cheaper and compress a little worse. On
 * bench/history's 73 MB of lines (3 segments; one stream read through all 3, loaded machine):
 * 256 KiB blocks 17.07 MB, ~150 ms; in (stream, position) order 17.20 MB at 256 KiB, 17.07 MB at
 * 1 MiB (~300 ms), 17.08 MB at 4 MiB (~1.4 s); v1, one stream in position order, 16.54 MB, ~9 s.
 */
export const defaultBlockBytes = 256 * 1024;

export type SegmentBlock = Readonly<{
  first: string;
  last: string;
  count: number;
  offset: number;
  bytes: number;
  rawBytes: number;
  sha256: string;
}>;

/**
 * `tree`, the summary of the segment's leaf range (docs/audit.md "Proofs without the whole log"), is
 * an optional field of version 2, not a version of its own: a reader refuses any version but its
 * own, and ignores a field it does not know, so the release before reads these segments too. The
 * header's `sha256` covers the block table only; `audit verify` checks the summary against the
 * leaves, and export's proofs against the signed root. As read it is unchecked: parseRangeSummary.
 */
export type SegmentHeaderV2 = SegmentHeaderBase &
  Readonly<{ order: 'stream,type,position'; blocks: readonly SegmentBlock[]; tree?: unknown }>;

const sha256 = (b: string | Buffer): string => createHash('sha256').update(b).digest('hex');
const blockTableSha = (blocks: readonly SegmentBlock[]): string => sha256(JSON.stringify(blocks));
const byPosition = (a: ArchivedRow, b: ArchivedRow): number => (a.position < b.position ? -1 : a.position > b.position ? 1 : 0);
/** The order of the lines: a stream's rows together, and within it each type's (like lines compress better together). */
const byStream = (a: ArchivedRow, b: ArchivedRow): number =>
  a.stream < b.stream ? -1 : a.stream > b.stream ? 1 : a.type < b.type ? -1 : a.type > b.type ? 1 : byPosition(a, b);

/** Rows in position order, at least one: the segment's bytes. */
export async function encodeSegmentV2(
  store: string,
  rows: readonly ArchivedRow[],
  blockBytes = defaultBlockBytes,
  tree?: RangeSummaryJson,
): Promise<EncodedSegment> {
  const parts: { first: string; last: string; lines: string[]; size: number }[] = [];
  let part: (typeof parts)[number] | null = null;
  for (const r of rows.slice().sort(byStream)) {
    if (part !== null && part.size >= blockBytes && (r.stream !== part.last || part.size >= 2 * blockBytes)) part = null;
    if (part === null) parts.push((part = { first: r.stream, last: r.stream, lines: [], size: 0 }));
    const line = `${rowLine(r)}\n`;
    part.lines.push(line);
    part.size += Buffer.byteLength(line, 'utf8');
    part.last = r.stream;
  }
  const compress = promisify(brotliCompress);
  const raws = parts.map((p) => Buffer.from(p.lines.join(''), 'utf8'));
  const compressed = await Promise.all(raws.map((raw) => compress(raw, brotliParams(raw.length))));
  let offset = 0;
  const blocks: SegmentBlock[] = parts.map((p, i) => {
    const b = {
      first: p.first,
      last: p.last,
      count: p.lines.length,
      offset,
      bytes: compressed[i]!.length,
      rawBytes: raws[i]!.length,
      sha256: sha256(raws[i]!),
    };
    offset += b.bytes;
    return b;
  });
  const first = rows[0]!.position;
  const last = rows[rows.length - 1]!.position;
  const header: SegmentHeaderV2 = {
    format: segmentFormat,
    version: segmentV2,
    store,
    from: first.toString(),
    to: last.toString(),
    count: rows.length,
    ...timeRange(rows),
    sha256: blockTableSha(blocks),
    order: 'stream,type,position',
    blocks,
    ...(tree === undefined ? {} : { tree }),
  };
  const line = Buffer.from(`${JSON.stringify(header)}\n`, 'utf8');
  const rawBytes = line.length + raws.reduce((s, r) => s + r.length, 0);
  return { name: segmentFileName(first, last), header, bytes: Buffer.concat([line, ...compressed]), rawBytes };
}

/** A v2 file opened: its header checked, its blocks read on demand. */
export type SegmentV2File = Readonly<{
  header: SegmentHeaderV2;
  rawBytes: number;
  /** The rows of `stream`, in position order: only the blocks whose range holds it are read. */
  streamRows: (stream: string) => ArchivedRow[];
  /** Every row, in the file's order (segment.ts sorts and checks them). */
  allRows: () => ArchivedRow[];
}>;

/** Open `path`, whose first bytes (`head`) are a v2 header's; check the header and block table. */
export function openSegmentV2(path: string, name: string, expect?: SegmentExpect): SegmentV2File {
  const { header, start, size } = readHeader(path, name);
  const changed = (why: string): SegmentError => new SegmentError(name, 'changed', why);
  if (header.version !== segmentV2 || !Array.isArray(header.blocks))
    throw changed(`format ${String(header.format)} v${String(header.version)}, not ${segmentFormat} v${segmentV2}`);
  const sha = blockTableSha(header.blocks);
  if (sha !== header.sha256) throw changed(`its block table's sha256 is ${sha}, its header says ${header.sha256}`);
  if (expect !== undefined && expect.sha256 !== sha) throw changed(`sha256 ${sha}, the store's manifest says ${expect.sha256}`);
  let offset = 0;
  let count = 0;
  for (const b of header.blocks) {
    if (b.offset !== offset) throw changed(`block at ${b.offset} where ${offset} was expected`);
    offset += b.bytes;
    count += b.count;
  }
  if (start + offset !== size) throw changed(`${size} bytes, its header accounts for ${start + offset}`);
  const want = expect?.count ?? header.count;
  if (count !== header.count || count !== want) throw changed(`${count} events in its blocks, header ${header.count}, manifest ${want}`);

  function readBlock(b: SegmentBlock): ArchivedRow[] {
    const buf = Buffer.alloc(b.bytes);
    const fd = openFile(path, name);
    try {
      if (readSync(fd, buf, 0, b.bytes, start + b.offset) !== b.bytes) throw changed(`block at ${b.offset} is cut short`);
    } finally {
      closeSync(fd);
    }
    let raw: Buffer;
    try {
      raw = brotliDecompressSync(buf);
    } catch (err) {
      throw changed(`block at ${b.offset} is not brotli: ${(err as Error).message}`);
    }
    if (sha256(raw) !== b.sha256) throw changed(`block at ${b.offset}: its sha256 is not the block table's`);
    const rows: ArchivedRow[] = [];
    for (const line of raw.toString('utf8').split('\n')) if (line !== '') rows.push(parseRowLine(line));
    if (rows.length !== b.count) throw changed(`block at ${b.offset} holds ${rows.length} events, its table says ${b.count}`);
    return rows;
  }

  const rawBytes = start + header.blocks.reduce((s, b) => s + b.rawBytes, 0);
  return {
    header,
    rawBytes,
    streamRows: (stream) =>
      header.blocks
        .filter((b) => b.first <= stream && stream <= b.last)
        .flatMap(readBlock)
        .filter((r) => r.stream === stream)
        .sort(byPosition),
    allRows: () => header.blocks.flatMap(readBlock),
  };
}

function openFile(path: string, name: string): number {
  try {
    return openSync(path, 'r');
  } catch (err) {
    throw new SegmentError(name, 'missing', (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message);
  }
}

/** The header line, read a growing chunk at a time; `start` is the offset of the first block. */
function readHeader(path: string, name: string): { header: SegmentHeaderV2; start: number; size: number } {
  const fd = openFile(path, name);
  try {
    const size = fstatSync(fd).size;
    for (let chunk = 64 * 1024; ; chunk *= 4) {
      const buf = Buffer.alloc(Math.min(chunk, size));
      const n = readSync(fd, buf, 0, buf.length, 0);
      const nl = buf.subarray(0, n).indexOf(10);
      if (nl < 0 && n < size) continue;
      if (nl < 0) throw new SegmentError(name, 'changed', 'no header line');
      try {
        return { header: JSON.parse(buf.subarray(0, nl).toString('utf8')) as SegmentHeaderV2, start: nl + 1, size };
      } catch {
        throw new SegmentError(name, 'changed', 'its header line is not JSON');
      }
    }
  } finally {
    closeSync(fd);
  }
}
