import { createHash } from 'node:crypto';
import { brotliCompressSync, brotliDecompressSync } from 'node:zlib';
import {
  SegmentError,
  brotliParams,
  checkedRows,
  parseRowLine,
  rowLine,
  segmentFileName,
  segmentFormat,
  timeRange,
} from './segmentFormat.ts';
import type { ArchivedRow, EncodedSegment, SegmentExpect, SegmentHeaderBase } from './segmentFormat.ts';

// Segment format v1, what Converge wrote before v2 (segmentV2.ts) and still reads: the whole file
// one brotli stream; a header line (JSON) with the sha256 of everything after it, then one line per
// event in position order. A read decompresses and parses all of it.

export const segmentV1 = 1;

/** A v1 segment's bytes. Only tests write v1 now: they check that such files are still read. */
export function encodeSegmentV1(store: string, rows: readonly ArchivedRow[]): EncodedSegment {
  const first = rows[0]!;
  const last = rows[rows.length - 1]!;
  const body = rows.map((r) => `${rowLine(r)}\n`).join('');
  const header: SegmentHeaderBase = {
    format: segmentFormat,
    version: segmentV1,
    store,
    from: first.position.toString(),
    to: last.position.toString(),
    count: rows.length,
    ...timeRange(rows),
    sha256: createHash('sha256').update(body).digest('hex'),
  };
  const raw = Buffer.from(`${JSON.stringify(header)}\n${body}`, 'utf8');
  return {
    name: segmentFileName(first.position, last.position),
    header,
    bytes: brotliCompressSync(raw, brotliParams(raw.length)),
    rawBytes: raw.length,
  };
}

/** A v1 file's rows, checked (header, body sha256, count, positions rising, and `expect`). */
export function decodeSegmentV1(
  compressed: Buffer,
  name: string,
  expect?: SegmentExpect,
): { header: SegmentHeaderBase; rows: ArchivedRow[]; rawBytes: number } {
  let text: string;
  try {
    text = brotliDecompressSync(compressed).toString('utf8');
  } catch (err) {
    throw new SegmentError(name, 'changed', `not brotli: ${(err as Error).message}`);
  }
  const nl = text.indexOf('\n');
  let header: SegmentHeaderBase;
  try {
    header = JSON.parse(text.slice(0, nl)) as SegmentHeaderBase;
  } catch {
    throw new SegmentError(name, 'changed', 'its header line is not JSON');
  }
  if (header.format !== segmentFormat || header.version !== segmentV1)
    throw new SegmentError(
      name,
      'changed',
      `format ${String(header.format)} v${String(header.version)}, not ${segmentFormat} v${segmentV1}`,
    );
  const body = text.slice(nl + 1);
  const sha = createHash('sha256').update(body).digest('hex');
  if (sha !== header.sha256) throw new SegmentError(name, 'changed', `its body's sha256 is ${sha}, its header says ${header.sha256}`);
  if (expect !== undefined && expect.sha256 !== sha)
    throw new SegmentError(name, 'changed', `sha256 ${sha}, the store's manifest says ${expect.sha256}`);
  const rows: ArchivedRow[] = [];
  for (const line of body.split('\n')) if (line !== '') rows.push(parseRowLine(line));
  return { header, rows: checkedRows(name, rows, header, expect), rawBytes: Buffer.byteLength(text, 'utf8') };
}
