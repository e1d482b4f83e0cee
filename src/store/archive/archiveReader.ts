import { join } from 'node:path';
import type { ArchiveManifest, ArchiveSegment } from '../port.ts';
import { SegmentError, readSegmentFile } from './segment.ts';
import type { ArchivedRow } from './segment.ts';

// Reads archive segments back, in position order or by stream, for the reads that answer over
// archived ranges (withArchive.ts). Only the segments the store's manifest names are read: a
// segment a crashed move left behind is not history yet (its rows are still in the store).
// Segments may overlap in range (a row the store kept at first, its stream's last send say, is
// archived later into a newer segment), so rows are merged across segments, never concatenated.

/** Decoded segments kept in memory: a walk in position order reads each once. */
const cachedSegments = 4;

export type ArchiveReader = Readonly<{
  /** Up to `limit` archived rows past `after`, in position order. */
  rowsAfter: (after: bigint, limit: number) => ArchivedRow[];
  /** Every archived row of `stream`, in revision order. */
  streamRows: (stream: string) => ArchivedRow[];
  /** Read and check every segment (sha256, count, store identity); the first problem of each. */
  check: () => { segment: ArchiveSegment; error: SegmentError }[];
}>;

export function createArchiveReader(dir: string, manifest: ArchiveManifest): ArchiveReader {
  const segments = [...manifest.segments].sort((a, b) => (a.from < b.from ? -1 : a.from > b.from ? 1 : 0));
  const cache = new Map<string, ArchivedRow[]>();

  function load(s: ArchiveSegment): ArchivedRow[] {
    const held = cache.get(s.file);
    if (held !== undefined) {
      cache.delete(s.file);
      cache.set(s.file, held);
      return held;
    }
    const d = readSegmentFile(join(dir, s.file), s.file, { sha256: s.sha256, count: s.events });
    if (d.header.store !== manifest.store)
      throw new SegmentError(s.file, 'changed', `it names store ${d.header.store}, not ${manifest.store}`);
    cache.set(s.file, d.rows);
    if (cache.size > cachedSegments) cache.delete(cache.keys().next().value!);
    return d.rows;
  }

  /** The index of the first row past `after` (rows in position order). */
  const firstAfter = (rows: readonly ArchivedRow[], after: bigint): number => {
    let lo = 0;
    let hi = rows.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (rows[mid]!.position <= after) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };

  function rowsAfter(after: bigint, limit: number): ArchivedRow[] {
    const out: ArchivedRow[] = [];
    let pending: ArchivedRow[] = [];
    for (const s of segments) {
      if (s.to <= after) continue;
      // Everything pending before this segment's first position comes before anything it holds.
      let k = 0;
      while (k < pending.length && pending[k]!.position < s.from) out.push(pending[k++]!);
      pending = pending.slice(k);
      if (out.length >= limit) return out.slice(0, limit);
      const rows = load(s);
      const from = firstAfter(rows, after);
      pending = mergeByPosition(pending, rows.slice(from, from + limit));
    }
    out.push(...pending);
    return out.slice(0, limit);
  }

  return {
    rowsAfter,
    streamRows(stream) {
      const rows: ArchivedRow[] = [];
      for (const s of segments) for (const r of load(s)) if (r.stream === stream) rows.push(r);
      return rows.sort((a, b) => (a.revision < b.revision ? -1 : a.revision > b.revision ? 1 : 0));
    },
    check() {
      const problems: { segment: ArchiveSegment; error: SegmentError }[] = [];
      for (const s of segments) {
        try {
          load(s);
        } catch (err) {
          if (err instanceof SegmentError) problems.push({ segment: s, error: err });
          else throw err;
        }
      }
      return problems;
    },
  };
}

/** Two lists in position order as one (segments never share a position). */
function mergeByPosition(a: readonly ArchivedRow[], b: readonly ArchivedRow[]): ArchivedRow[] {
  if (a.length === 0) return b.slice();
  const out: ArchivedRow[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) out.push(a[i]!.position < b[j]!.position ? a[i++]! : b[j++]!);
  while (i < a.length) out.push(a[i++]!);
  while (j < b.length) out.push(b[j++]!);
  return out;
}
