import { join } from 'node:path';
import type { ArchiveManifest, ArchiveSegment } from '../port.ts';
import { SegmentError, openSegment } from './segment.ts';
import type { ArchivedRow, SegmentFile } from './segment.ts';
import { parseRangeSummary } from '../../core/audit/rangeSummary.ts';
import type { SummaryToCheck } from '../../core/audit/rangeSummary.ts';

// Reads archive segments back, in position order or by stream, for the reads that answer over
// archived ranges (withArchive.ts). By stream, a v2 segment is read only in the blocks that hold
// the stream (segmentV2.ts); a walk in position order decodes whole segments, a few kept. Only the segments the store's manifest names are read: a
// segment a crashed move left behind is not history yet (its rows are still in the store).
// Segments may overlap in range (a row the store kept at first, its stream's last send say, is
// archived later into a newer segment), so rows are merged across segments, never concatenated.

/** Decoded segments kept in memory: a walk in position order reads each once. */
const cachedSegments = 4;

export type ArchiveReader = Readonly<{
  /** Up to `limit` archived rows past `after`, in position order. */
  rowsAfter: (after: bigint, limit: number) => ArchivedRow[];
  /**
   * Every archived row of `stream`, in revision order. `without`: segments known not to hold it
   * (their stream filter says so, streamFilter.ts), not opened.
   */
  streamRows: (stream: string, without?: ReadonlySet<string>) => ArchivedRow[];
  /** Read and check every segment (sha256, count, store identity); the first problem of each. */
  check: () => { segment: ArchiveSegment; error: SegmentError }[];
  /** The v2 segments opened so far, by manifest row: a later reader of the same folder starts from them. */
  opened: () => ReadonlyMap<ArchiveSegment, SegmentFile>;
  /** Each segment's summary of its leaf range, as its header holds it (docs/audit.md "Proofs without the whole log"); the segments without one are left out. */
  summaries: () => SummaryToCheck[];
  /** One segment's summary as its header holds it (opening the file if it is not yet), or null if it has none. */
  summaryOf: (file: string) => SummaryToCheck['summary'] | null;
  /** The positions of a segment's rows, ascending. */
  positions: (file: string) => bigint[];
  /** A segment's rows, whole, in position order. */
  segmentRows: (file: string) => ArchivedRow[];
  /** A segment's rows of `stream`, from the blocks that hold it. */
  streamRowsIn: (file: string, stream: string) => ArchivedRow[];
}>;

export type ArchiveReaderHooks = Readonly<{
  /** Called each time a segment file is opened (its header read); tests count them. */
  onOpen?: (file: string) => void;
  /** Called each time a segment is decoded whole (not from the few kept); tests count them. */
  onRead?: (file: string) => void;
  /**
   * A reader of the same folder over an older manifest (the API's, remade when a segment is
   * archived): the segments it opened are taken over where the manifest's row is the same.
   */
  previous?: ArchiveReader;
}>;

export function createArchiveReader(dir: string, manifest: ArchiveManifest, hooks: ArchiveReaderHooks = {}): ArchiveReader {
  const segments = [...manifest.segments].sort((a, b) => (a.from < b.from ? -1 : a.from > b.from ? 1 : 0));
  const cache = new Map<string, ArchivedRow[]>();
  // v2 segments opened: their headers (block tables) checked once, their blocks read on demand.
  const handles = new Map<string, SegmentFile>();
  // Every header read, v1's too (whose handles are not kept): a summary is read without opening the file again.
  const headers = new Map<string, SegmentFile['header']>();
  const same = (a: ArchiveSegment, b: ArchiveSegment): boolean => a.file === b.file && a.sha256 === b.sha256 && a.events === b.events;
  const rows = new Map(segments.map((s) => [s.file, s]));
  for (const [s, f] of hooks.previous?.opened() ?? []) {
    const now = rows.get(s.file);
    if (now !== undefined && same(now, s) && f.header.store === manifest.store) handles.set(s.file, f);
  }

  const listed = (file: string): ArchiveSegment => {
    const s = rows.get(file);
    if (s === undefined) throw new RangeError(`the manifest names no segment ${file}`);
    return s;
  };

  const remember = (file: string, rows: ArchivedRow[]): void => {
    cache.delete(file);
    cache.set(file, rows);
    if (cache.size > cachedSegments) cache.delete(cache.keys().next().value!);
  };

  function open(s: ArchiveSegment): SegmentFile {
    const held = handles.get(s.file);
    if (held !== undefined) return held;
    hooks.onOpen?.(s.file);
    const f = openSegment(join(dir, s.file), s.file, { sha256: s.sha256, count: s.events });
    if (f.header.store !== manifest.store)
      throw new SegmentError(s.file, 'changed', `it names store ${f.header.store}, not ${manifest.store}`);
    // A v1 file was decoded whole to open it: keep its rows as a walk's would be kept, not the handle.
    if (f.header.version === 1) remember(s.file, f.rows());
    else handles.set(s.file, f);
    headers.set(s.file, f.header);
    return f;
  }

  function headerSummary(s: ArchiveSegment): SummaryToCheck['summary'] | null {
    const { tree } = (headers.get(s.file) ?? open(s).header) as { tree?: unknown };
    return tree === undefined ? null : parseRangeSummary(tree);
  }

  function load(s: ArchiveSegment): ArchivedRow[] {
    const held = cache.get(s.file);
    if (held !== undefined) {
      remember(s.file, held);
      return held;
    }
    const f = open(s);
    const again = cache.get(s.file);
    if (again !== undefined) return again;
    hooks.onRead?.(s.file);
    const rows = f.rows();
    remember(s.file, rows);
    return rows;
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
    streamRows(stream, without) {
      const rows: ArchivedRow[] = [];
      for (const s of segments) {
        if (without?.has(s.file) === true) continue;
        const held = cache.get(s.file);
        rows.push(...(held !== undefined ? held.filter((r) => r.stream === stream) : open(s).streamRows(stream)));
      }
      return rows.sort((a, b) => (a.revision < b.revision ? -1 : a.revision > b.revision ? 1 : 0));
    },
    summaries: () =>
      segments.flatMap((s) => {
        const summary = headerSummary(s);
        return summary === null ? [] : [{ name: s.file, from: s.from, to: s.to, summary }];
      }),
    summaryOf: (file) => headerSummary(listed(file)),
    positions: (file) => load(listed(file)).map((r) => r.position),
    segmentRows: (file) => load(listed(file)),
    streamRowsIn: (file, stream) => {
      const held = cache.get(file);
      return held !== undefined ? held.filter((r) => r.stream === stream) : open(listed(file)).streamRows(stream);
    },
    opened: () => new Map([...handles].flatMap(([file, f]) => (rows.has(file) ? [[rows.get(file)!, f] as const] : []))),
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
