import { closeSync, fsyncSync, openSync, readFileSync, readSync } from 'node:fs';
import { open, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { SegmentError, checkedRows, segmentFormat } from './segmentFormat.ts';
import type { ArchivedRow, EncodedSegment, SegmentExpect, SegmentHeaderBase } from './segmentFormat.ts';
import type { RangeSummaryJson } from '../../core/audit/rangeSummary.ts';
import { decodeSegmentV1 } from './segmentV1.ts';
import { encodeSegmentV2, openSegmentV2, segmentV2 } from './segmentV2.ts';

// An archive segment (docs/operations.md "Retention and archive"): events moved out of the hot
// store, in a file that is self-describing so it can be checked without the store, and holds each
// row exactly as stored (data and metadata as their stored text, the leaf hash as hex), so `converge
// audit verify` recomputes each leaf from the archive alone. Written as v2 (segmentV2.ts: blocks,
// a stream read from its own block); v1 files (segmentV1.ts: one brotli stream) are still read.

export { SegmentError, segmentFileName, segmentFilePattern, segmentFormat, rowLine } from './segmentFormat.ts';
export type { ArchivedRow, EncodedSegment, SegmentHeaderBase as SegmentHeader, SegmentProblem } from './segmentFormat.ts';

/** The version `encodeSegment` writes. */
export const segmentVersion = segmentV2;

/** The segment's bytes, compressed. Rows in position order, at least one; `tree`, the summary of its leaf range. */
export const encodeSegment = (
  store: string,
  rows: readonly ArchivedRow[],
  blockBytes?: number,
  tree?: RangeSummaryJson,
): Promise<EncodedSegment> => encodeSegmentV2(store, rows, blockBytes, tree);

/** Test hook (CONVERGE_TEST_ARCHIVE_PAUSE): the archive crash test stops a move here and SIGKILLs it. */
export type PauseAt = (phase: string) => void;

/**
 * Put the segment in `dir` whole or not at all: a temporary name, fsync, rename, fsync of the
 * folder, so after a crash the file under its own name is complete and on disk. Off the event
 * loop: under serve --retain an fsync of a large file held ingest and the API for its duration.
 */
export async function writeSegmentFile(dir: string, seg: EncodedSegment, pause: PauseAt = () => {}): Promise<string> {
  const path = join(dir, seg.name);
  const tmp = `${path}.tmp`;
  const fh = await open(tmp, 'w');
  try {
    await fh.writeFile(seg.bytes);
    await fh.sync();
  } finally {
    await fh.close();
  }
  pause('temp-written');
  await rename(tmp, path);
  const d = await open(dir, 'r');
  try {
    await d.sync();
  } finally {
    await d.close();
  }
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

/** A segment opened for reading; a v1 file is decoded whole when opened, a v2 file block by block. */
export type SegmentFile = Readonly<{
  header: SegmentHeaderBase;
  /** The segment's uncompressed bytes (header and lines). */
  rawBytes: number;
  /** The rows of `stream`, in position order. */
  streamRows: (stream: string) => ArchivedRow[];
  /** Every row, in position order, checked (count, no position twice). */
  rows: () => ArchivedRow[];
}>;

/** A v2 file begins with its header in plain JSON; a v1 file with brotli's bytes. */
const plainHeader = Buffer.from(`{"format":"${segmentFormat}",`, 'utf8');

/** Open and check a segment's header against `expect` (the store's manifest row). Throws SegmentError. */
export function openSegment(path: string, name: string, expect?: SegmentExpect): SegmentFile {
  const head = Buffer.alloc(plainHeader.length);
  let n: number;
  try {
    const fd = openSync(path, 'r');
    try {
      n = readSync(fd, head, 0, head.length, 0);
    } finally {
      closeSync(fd);
    }
  } catch (err) {
    throw new SegmentError(name, 'missing', (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message);
  }
  if (n === head.length && head.equals(plainHeader)) {
    const f = openSegmentV2(path, name, expect);
    const byPosition = (a: ArchivedRow, b: ArchivedRow): number => (a.position < b.position ? -1 : a.position > b.position ? 1 : 0);
    return {
      header: f.header,
      rawBytes: f.rawBytes,
      streamRows: (stream) => f.streamRows(stream),
      rows: () => checkedRows(name, f.allRows().sort(byPosition), f.header, expect),
    };
  }
  const d = decodeSegmentV1(readFileSync(path), name, expect);
  return {
    header: d.header,
    rawBytes: d.rawBytes,
    streamRows: (stream) => d.rows.filter((r) => r.stream === stream),
    rows: () => d.rows,
  };
}

export type DecodedSegment = Readonly<{ header: SegmentHeaderBase; rows: ArchivedRow[]; rawBytes: number }>;

/**
 * Read and check a whole segment, either version: its header, its sha256 (v1 of the body, v2 of the
 * block table and each block), its count, no position twice; `expect` must match too. Throws SegmentError.
 */
export function readSegmentFile(path: string, name: string, expect?: SegmentExpect): DecodedSegment {
  const f = openSegment(path, name, expect);
  return { header: f.header, rows: f.rows(), rawBytes: f.rawBytes };
}
