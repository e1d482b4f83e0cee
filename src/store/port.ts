import type { ConvergeEvent, Recorded } from '../core/events/index.ts';
import type { RangeSummaryJson } from '../core/audit/rangeSummary.ts';
import type { StoreStats, StoreStatsOptions } from './storeStats.ts';

export type { AgeBucket, StatsCell, StorageSize, StoreStats, StoreStatsOptions } from './storeStats.ts';

// One small interface (docs/design.md#5-the-store-port), four adapters (memory, sqlite, postgres,
// esdb), one conformance suite (test/contracts/eventStore.contract.ts) that every adapter passes.

/**
 * Expected revision of a stream before an append, counted from 0 as EventStoreDB counts:
 * - 'no_stream'    the stream must not exist;
 * - 'stream_exists' it must have at least one event;
 * - 'any'          no check;
 * - bigint n       its last event must be at revision n.
 */
export type ExpectedRevision = 'any' | 'no_stream' | 'stream_exists' | bigint;

/** An event to append; `id` is deterministic (src/core/events/ids.ts) and makes retries no-ops. */
export type NewEvent<E extends ConvergeEvent = ConvergeEvent> = E & Readonly<{ id: string }>;

export type StreamWrite = Readonly<{ stream: string; expected: ExpectedRevision; events: readonly NewEvent[] }>;

export type AppendResult = Readonly<{
  /** One entry per write, in order. */
  streams: readonly Readonly<{
    stream: string;
    /** Revision of the stream's last event after this append (-1n if the stream is still empty). */
    nextExpected: bigint;
    /** Events actually written; events whose id was already stored are skipped, not duplicated. */
    written: number;
  }>[];
  /** Global position of the last event written by this call, or null if nothing new was written. */
  position: bigint | null;
}>;

export type ReadStreamOptions = Readonly<{
  direction?: 'forwards' | 'backwards';
  /** Start at this revision, inclusive (forwards default 0n; backwards default the end). */
  fromRevision?: bigint;
  limit?: number;
  /**
   * The caller folds only up to the stream's last event within this moment ("state as of",
   * docs/design.md §3): a store may leave out events that come after that one (an archived store
   * skips the segments that hold only such events, docs/store.md "Segment time ranges"). The
   * stream's last event is always given. Forwards reads only.
   */
  asOf?: StreamMoment;
  /**
   * The caller shows only the stream's events not before `moment` (`history --from`), and folds
   * from an earlier event on only as far back as `enough` asks: a store may then give a suffix of
   * the stream instead of all of it (an archived store leaves out the older segments, docs/store.md
   * "Skipping segments before a moment"). The suffix holds every event from its first on (as
   * `asOf` allows), every event not before `moment`, and `enough` holds of it; or it is the whole
   * stream. Forwards reads only; a store that reads the stream whole may ignore it.
   */
  since?: StreamSince;
}>;

/** ReadStreamOptions.since. `enough` is given suffixes that each hold every event from their first on. */
export type StreamSince = Readonly<{ moment: StreamMoment; enough: (suffix: readonly Recorded[]) => boolean }>;

/** A moment of ReadStreamOptions.asOf: a position, or a recorded time in ms since the epoch. */
export type StreamMoment = Readonly<{ position: bigint }> | Readonly<{ time: number }>;

export type ReadAllOptions = Readonly<{
  /** Exclusive: events with position > after. Default: from the beginning. */
  after?: bigint | null;
  limit?: number;
  /** Only streams starting with this prefix (Converge uses 'node-'). */
  streamPrefix?: string;
}>;

export type SubscribeOptions = Readonly<{
  /** Start after this position (exclusive); null = from the beginning. Ignored if `checkpoint` has a saved value. */
  after?: bigint | null;
  /**
   * Named checkpoint: the subscription resumes after the saved position, and saves the position
   * of each batch after `handler` resolves for it (so a crash replays, never skips).
   */
  checkpoint?: string;
  /**
   * Only these event types, selected by the store itself so the subscriber never reads or decodes
   * the others (the relay wants the rare DeclarationSent out of a log of reports).
   * Every adapter serves it: SQLite from a partial index of DeclarationSent (schema v2; other
   * types by a scan that decodes only the matching rows), memory by skipping rows before
   * decoding, EventStoreDB by a server-side event-type filter; PostgreSQL can keep the same
   * partial index. With a checkpoint, the saved position is that of the last matching event
   * handled: a restart re-reads from there, through the same filter.
   */
  types?: readonly ConvergeEvent['type'][];
  /** Max events handed to `handler` at once. */
  batchSize?: number;
  /**
   * Called with events in position order, never concurrently; the next batch waits for it.
   * If it throws, the subscription retries the same batch with backoff (it never skips).
   */
  handler: (events: readonly Recorded[]) => Promise<void> | void;
  /** Called once the subscription has read everything stored when it started ("caught up"), and then follows live. */
  onCaughtUp?: () => void;
  /** Called when handler fails or the store connection drops; the subscription keeps retrying. */
  onError?: (err: unknown) => void;
}>;

export type Subscription = Readonly<{
  /** Position of the last event handed to (and completed by) the handler, or null. */
  position: () => bigint | null;
  isCaughtUp: () => boolean;
  /** Stop; resolves once no handler call is running. */
  stop: () => Promise<void>;
}>;

/** A lease this process holds (EventStore.acquireLease). */
export type LeaseHold = Readonly<{
  /** Resolves if the lease is lost without being released (the store's connection for it died). */
  lost: Promise<void>;
  /** Give the lease up; another process may take it at once. */
  release: () => Promise<void>;
  /** The lease's generation, one more at every change of holder: the fencing token. */
  generation?: bigint;
  /** Whether this process may still act as the holder, by its own monotonic clock (no round trip). */
  valid?: () => boolean;
  /** Whether the store still names this generation the holder (a round trip): check before what must not be done twice. */
  current?: () => Promise<boolean>;
  /**
   * How the lease came to this process: `free` (never held, or given up by its holder), `gone`
   * (its holder's session had ended) or `stale` (its holder's beat had stopped: frozen or cut off,
   * and perhaps still running). From `gone` or `stale`, the old holder may have had work in flight.
   */
  takenFrom?: 'free' | 'gone' | 'stale';
}>;

// The bulk folds' columnar read (EventStore.readColumns; made and read in nodeColumns.ts).

/** A page of events, in position order. Entry i of each column is event i's (columns another kind uses hold leftovers). */
export type NodeColumns = {
  length: number;
  kind: Uint8Array;
  /** Exact: a store whose positions pass 2^53 fails the read (they are numbers here). */
  position: Float64Array;
  revision: Float64Array;
  /** The node the data names ('' for `other`). */
  node: string[];
  /** The node the stream names (nodeOfStream): the same string as `node` when they agree; null for a stream not a node's. */
  streamNode: (string | null)[];
  /** A report's event id (its duplicate check). */
  id: string[];
  /** sentAt / receivedAt / seenAt: its milliseconds when isoMs reads it (`timeText` null), else NaN and the text. */
  time: Float64Array;
  timeText: (string | null)[];
  /** A send's digest; a report's declared digest. */
  digest: (string | null)[];
  specDigest: string[];
  /** A send's serial; a report's `sentEarlier` serial (0: none or not recorded). */
  serial: Float64Array;
  /** A send's resource ids; a report's applied ids. */
  ids: (readonly string[])[];
  failed: Readonly<Record<string, string>>[];
  refused: string[];
  carried: (readonly number[])[];
};

export type ReadColumnsOptions = Readonly<{
  /** Exclusive, as readAll's. */
  after?: bigint | null;
  /** Only streams starting with this (readAll's streamPrefix): the others are neither decoded nor handed out. */
  streamPrefix?: string;
}>;

/** A send of a digest to a node, as EventStore.findSend answers it. */
export type SendFound = Readonly<{ serial: number; sentAt: string }>;

// The audit log (docs/audit.md): the tree the adapter keeps over its rows, and the rows as stored.

/** The audit tree's head as the store keeps it, updated in the transaction of every append. */
export type AuditHead = Readonly<{
  /** Leaves in the tree: the events appended through the store (or hashed by its migration). */
  size: bigint;
  /** The tree's root, 64 lowercase hex characters. */
  root: string;
  /**
   * From this position on the store hands out positions with no gap, so a missing one was
   * removed; below it (events stored before the store kept a tree) gaps may be its own. Null:
   * the store's positions are never dense (EventStoreDB).
   */
  denseFrom: bigint | null;
  /** True when the store keeps this head in its appends; false when it was computed from a read just now (EventStoreDB), so it proves nothing about the past. */
  keptByStore: boolean;
}>;

/** One event exactly as the store holds it, for recomputing its leaf (src/core/audit/leaf.ts). */
export type StoredRecord = Readonly<{
  position: bigint;
  id: string;
  stream: string;
  revision: bigint;
  type: string;
  /** The stored bytes of the data and the metadata (the JSON text, as UTF-8). */
  data: Uint8Array;
  metadata: Uint8Array;
  /** The leaf hash the store wrote beside the row; null if it holds none (a row no append wrote, or a store that keeps no tree). */
  leafHash: Uint8Array | null;
}>;

export type ReadStoredOptions = Readonly<{
  /** Exclusive, as readAll's. */
  after?: bigint | null;
  limit?: number;
}>;

/** One archive segment the store moved its events to (docs/operations.md "Retention and archive"): a row of its manifest. */
export type ArchiveSegment = Readonly<{
  /** The file's name inside the archive folder. */
  file: string;
  /** The first and last position it holds (it may skip positions the store kept). */
  from: bigint;
  to: bigint;
  events: number;
  /** sha256 of the file's uncompressed body, as its header says. */
  sha256: string;
  /** The compressed file, and its uncompressed bytes. */
  bytes: number;
  rawBytes: number;
  /**
   * The smallest and largest time its events were recorded at, in ms (segmentTimes.ts); absent for
   * a segment archived before they were kept, or by a release that does not keep them.
   */
  minTime?: number;
  maxTime?: number;
}>;

/** The store's archive manifest: the segments whose events it no longer holds, and its identity. */
export type ArchiveManifest = Readonly<{ store: string; segments: readonly ArchiveSegment[] }>;

/** EventStore.pipeline: `append`, ordered among the pipeline's other calls. */
export type LastSeenLease = Readonly<{ nodes: ReadonlyMap<string, number>; flushes: ReadonlyMap<string, number> }>;

export type AppendPipeline = Readonly<{ append: (writes: readonly StreamWrite[]) => Promise<AppendResult> }>;

export interface EventStore {
  readonly kind: 'memory' | 'sqlite' | 'esdb' | 'postgres';
  /** Append to one or many streams atomically where the store can (SQLite: one transaction). */
  append(writes: readonly StreamWrite[]): Promise<AppendResult>;
  /**
   * Appends that keep their order while several are in flight, for a store that can take the next
   * before the one before is on disk (SQLite: the writer thread, or group commit). Ingest appends
   * its next batch while the one before is committed and synced. Calls of one pipeline
   * commit in call order and settle in that order; once one fails, every later call of the same
   * pipeline fails untried (CONVERGE_ERR_STORE_UNAVAILABLE), so a caller that retries the failed
   * ones in order never has a later call overtake an earlier one. Stores whose commits may
   * complete out of call order (a pool of connections) leave it out.
   */
  pipeline?(): AppendPipeline;
  readStream(stream: string, options?: ReadStreamOptions): Promise<readonly Recorded[]>;
  readAll(options?: ReadAllOptions): AsyncIterable<readonly Recorded[]>;
  /**
   * readAll's events as pages of columns for the bulk folds (nodeColumns.ts). The definition is
   * columnsFromReadAll (readAll's batches put in columns), which memory, PostgreSQL and
   * EventStoreDB return; SQLite reads its pages itself (sqlite/sqliteColumnsFast.ts) and must equal it.
   */
  readColumns(options?: ReadColumnsOptions): AsyncIterable<NodeColumns>;
  /** Position of the newest event (null if the store is empty). */
  headPosition(): Promise<bigint | null>;
  /**
   * The latest DeclarationSent of `digest` in `node`'s stream (its serial and time), or null if
   * that digest was never sent to that node. Ingest asks only on the rare report naming a digest
   * older than the fold's bounded send history (createIngest.ts); SQLite and PostgreSQL answer
   * from an index of sends by stream and digest, memory and EventStoreDB by reading the stream.
   */
  findSend(node: string, digest: string): Promise<SendFound | null>;
  subscribe(options: SubscribeOptions): Subscription;
  getCheckpoint(name: string): Promise<bigint | null>;
  setCheckpoint(name: string, position: bigint): Promise<void>;
  /**
   * A role that one process at a time may play on this store, whichever engine it runs in (the
   * relay). Resolves once this process holds `name`, waiting while another does; null
   * if `signal` aborts first. Only stores several engines share have it (PostgreSQL: a session
   * row with a generation and a beat the holder renews; taken over when the holder's session ends or its beat stops).
   */
  acquireLease?(name: string, signal: AbortSignal): Promise<LeaseHold | null>;
  /**
   * The audit tree's head (docs/audit.md). SQLite, PostgreSQL and memory keep it in the append's
   * transaction; EventStoreDB, which runs no code of ours beside its writes, computes it from a
   * full read, so it only shows what the log holds now.
   */
  auditHead(): Promise<AuditHead>;
  /** Stored rows in position order, undecoded, with the leaf hash stored beside each: what `converge audit verify` walks. */
  readStored(options?: ReadStoredOptions): Promise<readonly StoredRecord[]>;
  /**
   * The last-seen lease (docs/design.md §3 "Liveness as recorded"): each node's exact last-seen
   * time, overwritten in place (a node's time only moves forward), and when `engine` last flushed.
   * Not history: the log records transitions, this bounds what a crash can lose of the times.
   */
  saveLastSeen(engine: string, flushedAt: number, nodes: readonly (readonly [node: string, ms: number])[]): Promise<void>;
  /** The whole lease: every node's last-seen time and every engine's last flush, in ms since the epoch. */
  loadLastSeen(): Promise<LastSeenLease>;
  /**
   * Events and stored bytes by type and age (`converge store stats`, storeStats.ts). SQLite and
   * PostgreSQL count in SQL, a window of positions per query (no index needed, the event loop
   * free between windows); memory walks its rows. EventStoreDB leaves it out: it would mean
   * reading the whole log over the network.
   */
  stats?(options: StoreStatsOptions): Promise<StoreStats>;
  /**
   * The archive manifest (docs/operations.md "Retention and archive"): the segments the store's
   * closed history was moved to. SQLite and PostgreSQL archive; the others leave it out.
   */
  archiveManifest?(): Promise<ArchiveManifest>;
  /**
   * The manifest's segments whose stream filter says they do not hold `stream`
   * (src/store/archive/streamFilter.ts), so a read of it skips them unopened. A segment with no
   * filter (archived before there were any) is never in it.
   */
  archiveSegmentsWithout?(stream: string): Promise<ReadonlySet<string>>;
  /**
   * Each listed segment's summary of its leaf range as the store keeps it beside the manifest
   * (src/store/archive/storedSummaries.ts), or what is wrong with its form; a segment archived
   * without one (before they were kept, or by the release before) is not in it.
   */
  archiveSummaries?(): Promise<ReadonlyMap<string, RangeSummaryJson | string>>;
  /**
   * The listed segments' files in the order they were archived (their manifest rows' time, then
   * last position): how their leaf ranges tile, for the back-fill of the summaries
   * (src/core/audit/summaryBackfill.ts).
   */
  archiveSegmentsInOrder?(): Promise<readonly string[]>;
  /** Keep these segments' summaries beside the manifest (`audit verify`'s back-fill); one already kept is left as it is. */
  recordArchiveSummaries?(summaries: ReadonlyMap<string, RangeSummaryJson>): Promise<void>;
  close(): Promise<void>;
}
