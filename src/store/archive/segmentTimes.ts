import type { Recorded } from '../../core/events/index.ts';
import { currentVersion, eventTimeField } from '../../core/events/index.ts';
import { decodeStoredData } from '../decodeStored.ts';
import type { ArchiveSegment, StreamMoment } from '../port.ts';
import type { ArchivedRow } from './segment.ts';

// The recorded times of an archive segment's events, smallest and largest (docs/store.md "Segment
// time ranges"): a read "as of" a moment leaves out the segments that can hold nothing it folds.
// Min and max, not first and last: an engine's clock may step back, and several engines append to
// one PostgreSQL store. A time is read from the decoded data, as the fold reads it
// (projections/node/forensics.ts isBeyond), so the range and the fold never disagree.

export type TimeRange = Readonly<{ min: number; max: number }>;

/** The time `data` of an event of `type` carries, in ms; NaN if none (the fold counts it as within any moment). */
function timeOf(type: string, data: unknown): number {
  const field = (eventTimeField as Readonly<Record<string, string>>)[type];
  const v = field === undefined ? undefined : (data as Record<string, unknown>)[field];
  return typeof v === 'string' ? Date.parse(v) : NaN;
}

/**
 * Whether `e` lies before `at`: stored before its position, or recorded before its time (an event
 * with no readable time is not, as `history --from` counts it).
 */
export const isBefore = (e: Recorded, at: StreamMoment): boolean =>
  'position' in at ? e.position < at.position : timeOf(e.type, e.data) < at.time;

/** Whether every event of segment `s` lies before `at`; false when its times are not known. */
export const segmentBefore = (s: ArchiveSegment, at: StreamMoment): boolean =>
  'position' in at ? s.to < at.position : s.maxTime !== undefined && s.maxTime < at.time;

/**
 * The range of `rows`' times; null if one has no readable time (the segment is then always opened).
 * A row of this version's shape carries the fold's time as the move read it (`time`, the same field
 * of the same data, taken in SQL): no upcaster ran on it, so only older rows are decoded.
 */
export function timeRangeOf(rows: readonly ArchivedRow[]): TimeRange | null {
  let min = Infinity;
  let max = -Infinity;
  // Nearly every row has the same metadata text: parsed once.
  let current: string | null = null;
  const isCurrent = (m: string): boolean =>
    m === current || ((JSON.parse(m) as { v?: unknown } | null)?.v === currentVersion && (current = m) !== null);
  for (const r of rows) {
    let t: number;
    try {
      t =
        typeof r.time === 'string' && isCurrent(r.metadata)
          ? Date.parse(r.time)
          : timeOf(r.type, decodeStoredData(r.type, JSON.parse(r.data), JSON.parse(r.metadata), r));
    } catch {
      return null;
    }
    if (Number.isNaN(t)) return null;
    if (t < min) min = t;
    if (t > max) max = t;
  }
  return rows.length === 0 ? null : { min, max };
}

/**
 * The segments among `candidates` (those that may hold the stream) a read of it as of `at` may
 * leave out: every event in them lies past the stream's last event within `at`, which is all the
 * fold stopped there folds. By position, a segment starting past it. By time, a segment starting
 * past `cutoff`, the last position that may hold an event within `at`: the hot events within it,
 * and the end of every candidate whose earliest time is within it or unknown. An event of the
 * stream past `cutoff` is then in no such segment and not hot, so it is beyond `at`.
 */
export function segmentsPast(candidates: readonly ArchiveSegment[], hot: readonly Recorded[], at: StreamMoment): Set<string> {
  let cutoff: bigint;
  if ('position' in at) cutoff = at.position;
  else {
    cutoff = -1n;
    for (const e of hot) {
      const t = timeOf(e.type, e.data);
      if (!(t > at.time) && e.position > cutoff) cutoff = e.position;
    }
    for (const s of candidates) if (!(s.minTime !== undefined && s.minTime > at.time) && s.to > cutoff) cutoff = s.to;
  }
  return new Set(candidates.filter((s) => s.from > cutoff).map((s) => s.file));
}
