import { setImmediate as nextTurn } from 'node:timers/promises';
import { mkdirSync, readdirSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { summariseRange } from '../../core/audit/rangeSummary.ts';
import type { RangeSummaryJson } from '../../core/audit/rangeSummary.ts';
import { ConvergeError } from '../../core/errors.ts';
import { encodeSegment, openSegment, segmentFilePattern, syncDir, writeSegmentFile } from './segment.ts';
import type { ArchivedRow, PauseAt } from './segment.ts';
import type { ArchiveManifest } from '../port.ts';

// The move of closed history to segments (docs/operations.md "Retention and archive"), the same
// for every store that archives (SQLite: ../sqlite/sqliteArchive.ts, PostgreSQL:
// ../postgres/postgresArchive.ts). Each segment is written whole (temp file, fsync, rename, fsync
// of the folder) before ONE transaction of the store records it in its manifest, records its
// sends and deletes its rows; a crash between the two leaves the rows in the store and a segment
// the manifest does not name, which the next run removes. Each segment's header carries the
// summary of its leaf range (docs/audit.md "Proofs without the whole log"), so that an export
// reads the roots of the ranges it does not need instead of their leaves.
//
// Closed: a node stream's event recorded before the cutoff, at a position below the latest
// snapshot's (start-up never needs it), and not one the engine reads from the hot store alone:
// each node stream keeps its last event (its revision), its last DeclarationSent (the serial and
// digest a send and findSend go on from) and its last ReportReceived (what it carries).

export type ArchiveOptions = Readonly<{
  dir: string;
  /** Events whose recorded time is before this ISO time are old enough. */
  before: string;
  /** Only positions below this one: the latest snapshot's. */
  belowPosition: bigint;
  /** Events per segment at most (default 100,000). */
  segmentEvents?: number;
  /** Stop after this many segments (serve's bounded batches); default no bound. */
  maxSegments?: number;
  /** Look only past this position (where the run before stopped, in serve's batches); default the start. */
  after?: bigint;
  onProgress?: (p: Readonly<{ position: bigint; upTo: bigint; segments: number; events: number }>) => void;
  /** Test hook; default: CONVERGE_TEST_ARCHIVE_PAUSE (the archive crash tests). */
  pause?: PauseAt;
}>;

export type ArchiveSummary = Readonly<{
  segments: readonly string[];
  events: number;
  /** Stored data and metadata of the events moved (as `store stats` counts bytes). */
  storedBytes: number;
  /** The segments: uncompressed, and on disk. */
  rawBytes: number;
  bytes: number;
  /** Files of an interrupted run the manifest did not name, removed (their rows were still in the store). */
  removedLeftovers: readonly string[];
  /** How far this run looked: the next batch may start after it. */
  scannedTo: bigint;
  /** Segments archived before SQLite store schema v7 whose sends this run indexed (../sqlite/sqliteArchivedSends.ts). */
  indexedSends: readonly string[];
}>;

/** A segment ready to be recorded: what the store's one transaction needs. */
export type SegmentToRecord = Readonly<{
  file: string;
  rows: readonly ArchivedRow[];
  sha256: string;
  bytes: number;
  rawBytes: number;
  /** The summary of its leaf range its header holds, which the store keeps beside its manifest row (storedSummaries.ts); null: none. */
  tree: RangeSummaryJson | null;
}>;

/** What the move needs of a store; it calls one method at a time, never two at once. */
export type ArchiveSource = Readonly<{
  /** The store's identity, which each segment names. */
  store: string;
  /** Up to `limit` rows with `after < position < below`, in position order. */
  page: (after: bigint, below: bigint, limit: number) => Promise<readonly ArchivedRow[]>;
  /** The positions each of `streams` keeps hot (its last event, last send, last report). */
  pinned: (streams: readonly string[]) => Promise<ReadonlyMap<string, ReadonlySet<bigint>>>;
  /**
   * In one transaction: record the segment in the manifest, its sends and its summary, delete its rows
   * (failing if one is gone), and call `pause('before-commit')` before committing.
   */
  commit: (segment: SegmentToRecord, pause: PauseAt) => Promise<void>;
  /** What the manifest holds when the run starts: its events, and the last position of any segment (null: none). */
  archived: Readonly<{ events: number; last: bigint | null }>;
  /** How many rows the store holds below `position`. */
  countBelow: (position: bigint) => Promise<number>;
  /** The position and stored leaf hash (hex, null if none) of each row with `from <= position <= to`, in position order. */
  leaves: (from: bigint, to: bigint) => Promise<readonly (readonly [bigint, string | null])[]>;
}>;

/** ArchiveSource.archived from the manifest read at the run's start. */
export function archivedOf(manifest: ArchiveManifest): ArchiveSource['archived'] {
  let last: bigint | null = null;
  for (const s of manifest.segments) if (last === null || s.to > last) last = s.to;
  return { events: manifest.segments.reduce((n, s) => n + s.events, 0), last };
}

/** Where the next segment's leaf range begins: the first position past every segment, and its leaf index. */
type TreeCursor = Readonly<{ position: bigint; leaf: number }>;

/**
 * The leaf index of the first position past every archived row: the rows below it are the archived
 * ones (all of them) and the hot ones below it. Counted at each run's start rather than read from
 * the last segment's header, so a segment without a summary (the release before) is no obstacle.
 */
async function treeCursor(source: ArchiveSource): Promise<TreeCursor> {
  const position = source.archived.last === null ? 0n : source.archived.last + 1n;
  return { position, leaf: source.archived.events + (await source.countBelow(position)) };
}

/**
 * The segment's summary of its leaf range (docs/audit.md "Proofs without the whole log"): from the
 * cursor to its last row, every row in between being its own or hot (no segment reaches past the
 * cursor). A segment whose rows all lie before the cursor (kept rows archived later) has an empty
 * range. Null when a row of the range has no stored leaf hash: the range is then read leaf by leaf.
 */
async function summarise(
  source: ArchiveSource,
  at: TreeCursor,
  rows: readonly ArchivedRow[],
): Promise<{ tree: RangeSummaryJson | null; next: TreeCursor }> {
  const last = rows[rows.length - 1]!.position;
  if (last < at.position) return { tree: { first: at.leaf, end: at.leaf, roots: [], foreign: [] }, next: at };
  const range = await source.leaves(at.position, last);
  const next = { position: last + 1n, leaf: at.leaf + range.length };
  const own = new Set(rows.map((r) => r.position));
  const held = range.filter(([p]) => own.has(p)).length;
  const mine = rows.filter((r) => r.position >= at.position).length;
  if (held !== mine) throw new Error(`${mine - held} of the segment's rows from ${at.position} on are not in the store`);
  if (range.some(([, leaf]) => leaf === null || leaf.length !== 64)) return { tree: null, next };
  return { tree: summariseRange(at.leaf, range as readonly (readonly [bigint, string])[], (p) => own.has(p)), next };
}

/** A segment row's send, as the store's `archived_sends` keeps it; null for any other event. */
export function sendOf(r: ArchivedRow): readonly [stream: string, digest: string, position: bigint, serial: number, sentAt: string] | null {
  if (r.type !== 'DeclarationSent') return null;
  const d = JSON.parse(r.data) as { digest: string; serial: number; sentAt: string };
  return [r.stream, d.digest, r.position, d.serial, d.sentAt];
}

/** Only node streams are ever moved (so since the first move): a read of any other stream needs no segment. */
export const archivedStreamPrefix = 'node-';

/** Rows read per query while looking for closed events. */
const scanPage = 5_000;

/**
 * CONVERGE_TEST_ARCHIVE_PAUSE=<phase>[:<k>]: at the k-th time (default the first) the move reaches
 * `phase`, print `paused <phase>` and block, so the archive crash tests SIGKILL it exactly there.
 * Phases: temp-written, renamed, before-commit (inside the transaction), committed.
 */
export function pauseFromEnv(): PauseAt {
  const spec = process.env['CONVERGE_TEST_ARCHIVE_PAUSE'];
  if (spec === undefined || spec === '') return () => {};
  const [want, nth] = spec.split(':');
  let seen = 0;
  return (phase) => {
    if (phase !== want || ++seen < Number(nth ?? 1)) return;
    writeSync(1, `paused ${phase}\n`);
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
  };
}

/**
 * Make the archive folder, and remove what an interrupted run left there: call holding the store's
 * archive lock. A segment file the manifest does not name is removed only when its header names
 * this store (a run stopped between its rename and its commit): one of another store's, or one
 * that cannot be read, may be the only copy of the history it holds, so the run is refused instead.
 */
export function prepareArchiveDir(dir: string, manifest: ArchiveManifest): string[] {
  makeArchiveDir(dir);
  const named = new Set(manifest.segments.map((s) => s.file));
  // One listing for both checks: a year under --retain is some 14,000 segments.
  const present = readdirSync(dir);
  const listed = new Set(present);
  // The store's segments are read from one folder: a run into another would split its archive in two.
  const absent = manifest.segments.filter((s) => !listed.has(s.file));
  if (absent.length > 0)
    throw new ConvergeError(
      'CONVERGE_ERR_CONFIG_INVALID',
      `the archive folder ${dir} does not hold ${absent.length} of this store's ${manifest.segments.length} archive segment(s) (the first: ${absent[0]!.file}): give the folder they were archived into, or put them back there; nothing was moved`,
    );
  const leftovers: string[] = [];
  for (const name of present) {
    if (name.endsWith('.ndjson.br.tmp')) leftovers.push(name);
    else if (segmentFilePattern.test(name) && !named.has(name)) {
      refuseUnlessOurs(dir, name, manifest.store);
      leftovers.push(name);
    }
  }
  for (const name of leftovers) rmSync(join(dir, name), { force: true });
  if (leftovers.length > 0) syncDir(dir);
  return leftovers;
}

/** Make the archive folder (and its parents) if missing; a path that cannot be one is a configuration error. */
export function makeArchiveDir(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === 'EEXIST' || code === 'ENOTDIR'
        ? "is not a folder (a file has its name or its parent's)"
        : `cannot be made: ${(err as Error).message}`;
    throw new ConvergeError('CONVERGE_ERR_CONFIG_INVALID', `the archive folder ${dir} ${why}`);
  }
}

function refuseUnlessOurs(dir: string, name: string, store: string): void {
  let owner: string;
  try {
    owner = openSegment(join(dir, name), name).header.store;
  } catch (err) {
    owner = `unreadable: ${(err as Error).message}`;
  }
  if (owner === store) return;
  throw new ConvergeError(
    'CONVERGE_ERR_CONFIG_INVALID',
    `the archive folder ${dir} holds ${name}, a segment this store's manifest does not name, of another store (${owner}; this store is ${store}): give each store an archive folder of its own; nothing was moved or removed`,
  );
}

/** Move `source`'s closed history to segments in `options.dir`; the caller holds the store's archive lock. */
export async function moveClosedHistory(
  source: ArchiveSource,
  options: ArchiveOptions,
): Promise<Omit<ArchiveSummary, 'removedLeftovers' | 'indexedSends'>> {
  const pause = options.pause ?? pauseFromEnv();
  const segmentEvents = options.segmentEvents ?? 100_000;
  const maxSegments = options.maxSegments ?? Infinity;
  const segments: string[] = [];
  let events = 0;
  let storedBytes = 0;
  let rawBytes = 0;
  let bytes = 0;
  let pending: ArchivedRow[] = [];
  let cursor: TreeCursor | null = null;

  const flush = async (): Promise<void> => {
    if (pending.length === 0) return;
    const rows = pending;
    pending = [];
    cursor ??= await treeCursor(source);
    const { tree, next } = await summarise(source, cursor, rows);
    const seg = await encodeSegment(source.store, rows, undefined, tree ?? undefined);
    const file = await writeSegmentFile(options.dir, seg, pause);
    try {
      await source.commit(
        { file: seg.name, rows, sha256: seg.header.sha256, bytes: seg.bytes.length, rawBytes: seg.rawBytes, tree },
        pause,
      );
    } catch (err) {
      rmSync(file, { force: true });
      throw err;
    }
    pause('committed');
    cursor = next;
    segments.push(seg.name);
    events += rows.length;
    rawBytes += seg.rawBytes;
    bytes += seg.bytes.length;
    for (const r of rows) storedBytes += Buffer.byteLength(r.data, 'utf8') + Buffer.byteLength(r.metadata, 'utf8');
  };

  let after = options.after ?? 0n;
  for (;;) {
    if (segments.length >= maxSegments) break;
    const page = await source.page(after, options.belowPosition, scanPage);
    if (page.length === 0) break;
    const old = page.filter((r) => r.stream.startsWith(archivedStreamPrefix) && r.time !== null && r.time < options.before);
    // A page's pins hold for the whole page: appends only add newer rows, and a move never takes a pinned one.
    const pins = old.length === 0 ? new Map<string, ReadonlySet<bigint>>() : await source.pinned([...new Set(old.map((r) => r.stream))]);
    const oldAt = new Set(old.map((r) => r.position));
    for (const r of page) {
      after = r.position;
      if (!oldAt.has(r.position) || pins.get(r.stream)?.has(r.position) === true) continue;
      pending.push(r);
      if (pending.length >= segmentEvents) {
        await flush();
        if (segments.length >= maxSegments) break;
      }
    }
    options.onProgress?.({ position: after, upTo: options.belowPosition, segments: segments.length, events: events + pending.length });
    // Let the event loop run between pages (serve's requests, a progress line).
    await nextTurn();
  }
  if (segments.length < maxSegments) await flush();
  return { segments, events, storedBytes, rawBytes, bytes, scannedTo: after };
}
