import { eventTimeField } from '../core/events/index.ts';

// What `converge store stats` shows (EventStore.stats): the store's events and their stored bytes
// by event type and by age. An event's age is that of the time it carries (eventTimeField),
// compared as text with the bucket bounds, as the engine writes every time (Date#toISOString):
// SQLite, PostgreSQL and memory compare the same strings the same way, so they give equal cells.

export const ageBuckets = ['day', 'week', 'month', 'older'] as const;
export type AgeBucket = (typeof ageBuckets)[number];

/** Events of one type in one age bucket; bytes: the stored JSON of their data and metadata, as UTF-8. */
export type StatsCell = Readonly<{ type: string; age: AgeBucket; events: number; bytes: number }>;

/** Where the store keeps its events and how large that is: a SQLite file and its WAL, a PostgreSQL table with its indexes. */
export type StorageSize = Readonly<{ kind: 'file' | 'table'; name: string; bytes: number }>;

export type StoreStats = Readonly<{
  /** Every (type, age) pair with at least one event, in no order. */
  cells: readonly StatsCell[];
  storage: readonly StorageSize[];
}>;

export type StoreStatsOptions = Readonly<{
  /** Ages are counted back from here. */
  now: Date;
  /** Told now and then how far the scan got: the last position read and the head when it began. */
  onProgress?: (position: bigint, head: bigint) => void;
}>;

const dayMs = 86_400_000;

/** The lower bounds of the first three buckets, newest first: an event at or after `day` is in `day`, and so on. */
export function ageBounds(now: Date): Readonly<{ day: string; week: string; month: string }> {
  const t = now.getTime();
  const iso = (ms: number): string => new Date(ms).toISOString();
  return { day: iso(t - dayMs), week: iso(t - 7 * dayMs), month: iso(t - 30 * dayMs) };
}

/** The bucket of a stored time's text (null or not text: `older`, as SQL's comparisons with NULL are false). */
export function ageOf(time: unknown, bounds: ReturnType<typeof ageBounds>): AgeBucket {
  if (typeof time !== 'string') return 'older';
  return time >= bounds.day ? 'day' : time >= bounds.week ? 'week' : time >= bounds.month ? 'month' : 'older';
}

/** The time field a type's data holds, for an adapter that reads it itself; undefined for an unknown type. */
export const timeFieldOf = (type: string): string | undefined => (eventTimeField as Readonly<Record<string, string>>)[type];

/**
 * SQL for the time of a row: a CASE over the type naming each type's field. `field(name)` is the
 * dialect's "this text field of the data" (the names come from the closed set in timeField.ts).
 */
export const timeSql = (field: (name: string) => string): string =>
  `CASE type ${Object.entries(eventTimeField)
    .map(([type, name]) => `WHEN '${type}' THEN ${field(name)}`)
    .join(' ')} END`;

/** Cells added into `into` (one scan window's rows onto the totals so far). */
export function addCells(
  into: Map<string, { type: string; age: AgeBucket; events: number; bytes: number }>,
  cells: Iterable<StatsCell>,
): void {
  for (const c of cells) {
    const key = `${c.type}\u0000${c.age}`;
    const held = into.get(key);
    if (held === undefined) into.set(key, { ...c });
    else {
      held.events += c.events;
      held.bytes += c.bytes;
    }
  }
}

export type StatsSummary = Readonly<{
  events: number;
  bytes: number;
  byType: readonly Readonly<{ type: string; events: number; bytes: number }>[];
  byAge: readonly Readonly<{ age: AgeBucket; events: number; bytes: number }>[];
}>;

/** Totals, by type (most bytes first) and by age (newest first, every bucket listed). */
export function summarizeStats(cells: readonly StatsCell[]): StatsSummary {
  const byType = new Map<string, { type: string; events: number; bytes: number }>();
  const byAge = new Map<AgeBucket, { age: AgeBucket; events: number; bytes: number }>(
    ageBuckets.map((a) => [a, { age: a, events: 0, bytes: 0 }]),
  );
  let events = 0;
  let bytes = 0;
  for (const c of cells) {
    events += c.events;
    bytes += c.bytes;
    const t = byType.get(c.type) ?? { type: c.type, events: 0, bytes: 0 };
    t.events += c.events;
    t.bytes += c.bytes;
    byType.set(c.type, t);
    const a = byAge.get(c.age)!;
    a.events += c.events;
    a.bytes += c.bytes;
  }
  return {
    events,
    bytes,
    byType: [...byType.values()].sort((a, b) => b.bytes - a.bytes || (a.type < b.type ? -1 : 1)),
    byAge: [...byAge.values()],
  };
}
