import type { Recorded } from '../../core/events/index.ts';
import { decodeStoredData } from '../decodeStored.ts';
import { columnsFromReadAll } from '../nodeColumns.ts';
import { createNotifier } from '../notifier.ts';
import { createPollingSubscription } from '../pollingSubscription.ts';
import type {
  ArchiveManifest,
  EventStore,
  ReadAllOptions,
  ReadStreamOptions,
  StoredRecord,
  StreamMoment,
  StreamSince,
  SubscribeOptions,
} from '../port.ts';
import { archivedStreamPrefix } from './archiveMove.ts';
import { createArchiveReader } from './archiveReader.ts';
import type { ArchiveReader, ArchiveReaderHooks } from './archiveReader.ts';
import type { ArchivedRow } from './segment.ts';
import { isBefore, segmentBefore, segmentsPast } from './segmentTimes.ts';
import { boundStore } from './boundStore.ts';

// A store's reads answered over its archive too (docs/operations.md "Retention and archive"):
// readAll, readColumns, readStream and readStored merge the segments the manifest names with the
// hot rows, by position (or revision), so `history`, `state --at`, `forensics`, `replay --verify`
// and `audit verify` give the answers they gave before the move; subscribe follows the same merged
// history (replay --verify's live path). A position in both (never after
// a move's commit; a row is either archived or hot) is read once. Everything else is the store's.
// The engine never reads through this: its warm start begins at the snapshot, above the archive.

const batch = 1000;

export type ArchivedStore = EventStore & Readonly<{ archive: ArchiveReader; manifest: ArchiveManifest; hot: EventStore }>;

/** An archived row as `readStored` gives it: the stored bytes, the stored leaf hash. */
export const storedOf = (r: ArchivedRow): StoredRecord => ({
  position: r.position,
  id: r.id,
  stream: r.stream,
  revision: r.revision,
  type: r.type,
  data: Buffer.from(r.data, 'utf8'),
  metadata: Buffer.from(r.metadata, 'utf8'),
  leafHash: r.leaf === null ? null : Buffer.from(r.leaf, 'hex'),
});

/** `store` with its archive in `dir` merged into its reads; the manifest is read once, now. */
export async function withArchive(store: EventStore, dir: string, hooks: ArchiveReaderHooks = {}): Promise<ArchivedStore> {
  const manifest: ArchiveManifest = store.archiveManifest === undefined ? { store: '', segments: [] } : await store.archiveManifest();
  const archive = createArchiveReader(dir, manifest, hooks);
  const none = manifest.segments.length === 0;
  // The last stream read from the archive: `history` pages back through one stream a call at a time.
  let lastStream: { stream: string; rows: Promise<readonly Recorded[]> } | null = null;

  const recorded = (r: ArchivedRow): Recorded =>
    ({
      type: r.type,
      data: decodeStoredData(r.type, JSON.parse(r.data), JSON.parse(r.metadata), r),
      id: r.id,
      stream: r.stream,
      revision: r.revision,
      position: r.position,
    }) as Recorded;

  /**
   * One step of a merged walk: the first `n` positions past `after` in the archive and in the hot
   * store, merged; `bound` is how far both lists are complete (null: both ran out).
   */
  function merge<T extends { position: bigint }>(archived: readonly T[], fullA: boolean, hot: readonly T[], fullH: boolean) {
    const boundA = fullA ? archived[archived.length - 1]!.position : null;
    const boundH = fullH ? hot[hot.length - 1]!.position : null;
    const bound = boundA === null ? boundH : boundH === null ? boundA : boundA < boundH ? boundA : boundH;
    const out: T[] = [];
    let i = 0;
    let j = 0;
    const take = (x: T): void => {
      if (bound !== null && x.position > bound) return;
      if (out.length > 0 && out[out.length - 1]!.position === x.position) return;
      out.push(x);
    };
    while (i < archived.length || j < hot.length) {
      if (j >= hot.length || (i < archived.length && archived[i]!.position <= hot[j]!.position)) take(archived[i++]!);
      else take(hot[j++]!);
    }
    return { out, bound };
  }

  async function hotAll(after: bigint, n: number, streamPrefix: string | undefined): Promise<Recorded[]> {
    const got: Recorded[] = [];
    for await (const b of store.readAll({ after, limit: n, ...(streamPrefix === undefined ? {} : { streamPrefix }) })) got.push(...b);
    return got;
  }

  async function* readAll(opts: ReadAllOptions = {}): AsyncIterable<readonly Recorded[]> {
    if (none) {
      yield* store.readAll(opts);
      return;
    }
    let after = opts.after ?? 0n;
    let left = opts.limit ?? Number.MAX_SAFE_INTEGER;
    const prefix = opts.streamPrefix;
    while (left > 0) {
      const rows = archive.rowsAfter(after, batch);
      const a = rows.filter((r) => prefix === undefined || r.stream.startsWith(prefix)).map(recorded);
      const h = await hotAll(after, batch, prefix);
      // A row the prefix leaves out still counts towards how far the archive's list is complete.
      const fullA = rows.length === batch;
      const boundA = fullA ? rows[rows.length - 1]!.position : null;
      const { out, bound } = merge(a, false, h, h.length === batch);
      const cut = boundA !== null && (bound === null || boundA < bound) ? boundA : bound;
      const events = cut === null ? out : out.filter((e) => e.position <= cut);
      if (events.length > 0) {
        const given = events.slice(0, left);
        left -= given.length;
        yield given;
      }
      if (cut === null) return;
      after = cut;
    }
  }

  async function readStream(stream: string, opts: ReadStreamOptions = {}): Promise<readonly Recorded[]> {
    // The observation stream, a rollout's: never archived, so no segment is opened for them, filters or none.
    if (none || !stream.startsWith(archivedStreamPrefix)) return store.readStream(stream, opts);
    const hot = await store.readStream(stream);
    const forwards = opts.direction !== 'backwards';
    // The whole stream read last serves as it is: a superset of any suffix.
    let events =
      opts.since !== undefined && forwards && lastStream?.stream !== stream
        ? [...(await archivedSince(stream, hot, opts.asOf, opts.since))]
        : byRevision(await (opts.asOf === undefined || !forwards ? archivedStream(stream) : archivedAsOf(stream, hot, opts.asOf)), hot);
    if (opts.direction === 'backwards') {
      events = events.reverse();
      if (opts.fromRevision !== undefined) events = events.filter((e) => e.revision <= opts.fromRevision!);
    } else if (opts.fromRevision !== undefined) events = events.filter((e) => e.revision >= opts.fromRevision!);
    return opts.limit === undefined ? events : events.slice(0, opts.limit);
  }

  /** `stream`'s archived rows, from the segments its filter does not rule out (streamFilter.ts). */
  function archivedStream(stream: string): Promise<readonly Recorded[]> {
    if (lastStream?.stream === stream) return lastStream.rows;
    const rows = (async () => {
      const without = (await store.archiveSegmentsWithout?.(stream)) ?? new Set<string>();
      return archive.streamRows(stream, without).map(recorded);
    })();
    lastStream = { stream, rows };
    rows.catch(() => {
      if (lastStream?.rows === rows) lastStream = null;
    });
    return rows;
  }

  /**
   * `stream`'s archived rows the fold as of `at` may need: the segments past it (segmentTimes.ts)
   * are left out as well. The rows read last for the whole stream serve, being a superset.
   */
  async function archivedAsOf(stream: string, hot: readonly Recorded[], at: StreamMoment): Promise<readonly Recorded[]> {
    if (lastStream?.stream === stream) return lastStream.rows;
    const without = (await store.archiveSegmentsWithout?.(stream)) ?? new Set<string>();
    const past = segmentsPast(
      manifest.segments.filter((s) => !without.has(s.file)),
      hot,
      at,
    );
    return archive.streamRows(stream, new Set([...without, ...past])).map(recorded);
  }

  /**
   * A suffix of `stream` that `since` accepts (ReadStreamOptions.since): the segments that may hold
   * an event not before its moment are read, then the older ones, newest end first, only until the
   * suffix they complete is enough. Segments may overlap, so the suffix is complete from one past
   * the end of the newest segment left unread; it must reach back past every event not before the
   * moment (segmentBefore: none in an unread segment; the hot ones are looked at).
   */
  async function archivedSince(
    stream: string,
    hot: readonly Recorded[],
    asOf: StreamMoment | undefined,
    since: StreamSince,
  ): Promise<readonly Recorded[]> {
    const without = (await store.archiveSegmentsWithout?.(stream)) ?? new Set<string>();
    const holding = manifest.segments.filter((s) => !without.has(s.file));
    const past = asOf === undefined ? new Set<string>() : segmentsPast(holding, hot, asOf);
    const candidates = holding.filter((s) => !past.has(s.file));
    const older = candidates.filter((s) => segmentBefore(s, since.moment)).sort((a, b) => (a.to > b.to ? -1 : a.to < b.to ? 1 : 0));
    const only = (files: readonly string[]): ArchivedRow[] => {
      const wanted = new Set(files);
      return archive.streamRows(stream, new Set(manifest.segments.map((s) => s.file).filter((f) => !wanted.has(f))));
    };
    const read = only(candidates.filter((s) => !segmentBefore(s, since.moment)).map((s) => s.file)).map(recorded);
    let reach: bigint | null = null;
    for (const e of [...read, ...hot]) if (!isBefore(e, since.moment) && (reach === null || e.position < reach)) reach = e.position;
    for (let next = 0; ; next++) {
      const events = byRevision(read, hot);
      if (next === older.length) return events;
      const complete = older[next]!.to + 1n;
      if (reach === null || complete <= reach) {
        const suffix = events.filter((e) => e.position >= complete);
        // Empty when an unread segment ends past the stream's last event (a filter's false positive).
        if (suffix.length > 0 && since.enough(suffix)) return suffix;
      }
      read.push(...archive.streamRowsIn(older[next]!.file, stream).map(recorded));
    }
  }

  async function readStored(opts: Readonly<{ after?: bigint | null; limit?: number }> = {}): Promise<readonly StoredRecord[]> {
    if (none) return store.readStored(opts);
    const after = opts.after ?? 0n;
    const n = opts.limit ?? 1000;
    const a = archive.rowsAfter(after, n).map(storedOf);
    const h = await store.readStored({ after, limit: n });
    return merge(a, a.length === n, h, h.length === n).out.slice(0, n);
  }

  /** A subscription over the merged history (replay --verify's live path folds through one); it polls for what is new. */
  function subscribe(opts: SubscribeOptions) {
    if (none) return store.subscribe(opts);
    return createPollingSubscription(
      {
        readAfter: async (after, limit, types) => {
          const out: Recorded[] = [];
          for await (const b of readAll({ after: after ?? 0n })) {
            for (const e of b) {
              if (types !== null && !types.has(e.type)) continue;
              out.push(e);
              if (out.length >= limit) return out;
            }
          }
          return out;
        },
        headPosition: () => store.headPosition(),
        getCheckpoint: (name) => store.getCheckpoint(name),
        setCheckpoint: (name, p) => store.setCheckpoint(name, p),
        notifier: createNotifier(),
        pollMs: 200,
      },
      opts,
    );
  }

  const merged: ArchivedStore = {
    ...boundStore(store),
    readAll,
    readStream,
    readStored,
    subscribe,
    readColumns: (options = {}) => columnsFromReadAll(merged, options),
    archive,
    manifest,
    hot: store,
  };
  return merged;
}

/** Archived and hot events of one stream in revision order, a revision in both read once (the hot one). */
function byRevision(archived: readonly Recorded[], hot: readonly Recorded[]): Recorded[] {
  const out = new Map<bigint, Recorded>();
  for (const r of archived) out.set(r.revision, r);
  for (const e of hot) out.set(e.revision, e);
  return [...out.values()].sort((a, b) => (a.revision < b.revision ? -1 : 1));
}
