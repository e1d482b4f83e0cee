import { resolve } from 'node:path';
import Database from 'better-sqlite3';
import { ConvergeError } from '../../core/errors.ts';
import type { ConvergeEvent, Recorded } from '../../core/events/index.ts';
import { decodeEventData, exactNumber, isEventType, isNodeEvent } from '../../core/events/index.ts';
import { defaultMaxEventBytes, encodeWrites, metadataJson, storeClosed, recorded } from '../appendRules.ts';
import type { Notifier } from '../notifier.ts';
import { createNotifier } from '../notifier.ts';
import { createNodeColumns, eventKind, kindOfType, putEvent, putFastData, streamNodeOf } from '../nodeColumns.ts';
import type { NodeColumns } from '../nodeColumns.ts';
import { createPollingSubscription } from '../pollingSubscription.ts';
import type {
  AppendPipeline,
  AppendResult,
  EventStore,
  ReadAllOptions,
  ReadStreamOptions,
  StreamWrite,
  SubscribeOptions,
} from '../port.ts';
import { sqliteError } from './sqliteErrors.ts';
import { appendResultOf, createSqliteWriter, pipelineRefused } from './sqliteWriter.ts';
import type { Written } from './sqliteWriter.ts';
import { startWriterThread } from './sqliteWriterClient.ts';
import type { WriterClient } from './sqliteWriterClient.ts';
import { createWalSyncer } from './walSync.ts';
import type { WalSyncer } from './walSync.ts';

// The embedded default store (DESIGN §5). One file, WAL, and an append resolves only once its
// commit is on disk, so an acknowledged report survives power loss; batching (one transaction
// per append call) is how it gets fast, not weaker sync. Two ways to the disk (option `sync`):
// SQLite's synchronous=FULL, which fdatasyncs the WAL inside each COMMIT on the event loop, or
// group commit (walSync.ts), which commits with synchronous=NORMAL and fdatasyncs the WAL on a
// libuv thread, readers of this process seeing nothing past the oldest commit not yet synced. Positions are INTEGER PRIMARY KEY AUTOINCREMENT, so SQLite never hands
// out a position twice, even after the newest rows are gone (plain rowids may be reused).

export type SqliteEventStoreOptions = Readonly<{
  /**
   * How an append reaches the disk before it resolves (docs/store.md, Durability). `full`
   * (default): SQLite's `synchronous` below, the sync inside each COMMIT on the event loop.
   * `group`: synchronous=NORMAL and an fdatasync of the WAL on a libuv thread after the commit;
   * appends committed meanwhile share the next sync, and this process reads nothing (append
   * results aside) past the oldest commit not yet synced. As durable as FULL; other processes
   * may read a commit before its sync. `thread` (serve's default): every write goes to a writer
   * thread with a connection of its own at synchronous=FULL (sqliteWriterThread.ts), which
   * writes what is queued in one transaction; reads stay on the calling thread and see a commit
   * once it is on disk. `:memory:` (nothing to sync, one connection) and a file SQLite cannot
   * keep in WAL mode stay on `full`.
   */
  sync?: 'full' | 'group' | 'thread';
  /** The WAL sync of `group` (default fdatasync); tests hold it pending or make it fail. */
  walSync?: (fd: number) => Promise<void>;
  /** `full` only: FULL (default) fsyncs the WAL on every commit; NORMAL may lose the last commits on power loss. */
  synchronous?: 'FULL' | 'NORMAL' | 'EXTRA';
  maxEventBytes?: number;
  /** How often live subscriptions look for appends made by another process (ms). */
  pollMs?: number;
  /** How long a write waits for another process's write lock before failing (ms). */
  busyTimeoutMs?: number;
  /** Events per read query in readAll and subscriptions. */
  readBatchSize?: number;
  /**
   * Stored JSON per read query (at least one event): decoding is synchronous, and 1,000 reports
   * of 130 KB each took seconds of one event-loop turn (issue 13). Default 256 KiB.
   */
  readBatchBytes?: number;
}>;

/** Bump with a migration in `migrations` below whenever the schema changes. */
export const sqliteSchemaVersion = 2;
/** 'CNVG': marks the file as a Converge store, so a foreign SQLite file is refused, not altered. */
const applicationId = 0x434e5647;

const schemaV1 = `
CREATE TABLE events (
  position INTEGER PRIMARY KEY AUTOINCREMENT,
  id       TEXT    NOT NULL UNIQUE,
  stream   TEXT    NOT NULL,
  revision INTEGER NOT NULL,
  type     TEXT    NOT NULL,
  data     TEXT    NOT NULL,
  metadata TEXT    NOT NULL,
  UNIQUE (stream, revision)
);
CREATE TABLE checkpoints (
  name     TEXT PRIMARY KEY,
  position INTEGER NOT NULL
) WITHOUT ROWID;
`;

/**
 * Event types with an index of their own (schema v2), so a subscription that wants only them
 * (the relay: SubscribeOptions.types) reads them without touching the rest of the log. Partial,
 * so the rows that make up nearly all of the log — reports and alives — add nothing to any
 * index and ingest pays nothing for it. Issue 10: the relay read and decoded every event to find
 * the rare DeclarationSent, ~20–30 µs of each report's cost in `serve`.
 */
/** Below this many events a stream prefix is read through the stream index (readAll). */
const rarePrefixRows = 10_000;

const indexedTypes: ReadonlySet<string> = new Set(['DeclarationSent']);

/** migrations[v] turns a version-v file into version v+1, inside one transaction. */
const migrations: Readonly<Record<number, (db: Database.Database) => void>> = {
  // v2: the partial index of indexedTypes. Building it reads the table once (a few seconds for
  // millions of events); nothing else changes, so a v1 file keeps every event and checkpoint.
  1: (db) => db.exec("CREATE INDEX events_declarations ON events (position) WHERE type = 'DeclarationSent'"),
};

/**
 * Same-process subscriptions on one file share a notifier, whichever handle appended; and every
 * handle's reads stop before the oldest position any handle of the file has committed but not yet
 * synced (`unsynced`: one function per group-commit handle, null when it has nothing waiting).
 */
const notifiers = new Map<string, { notifier: Notifier; users: number; unsynced: Set<() => bigint | null> }>();

function migrate(db: Database.Database, path: string): void {
  const version = db.pragma('user_version', { simple: true }) as number;
  const appId = db.pragma('application_id', { simple: true }) as number;
  const tables = (db.prepare("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table'").get() as { n: number }).n;
  if (version === 0 && tables === 0) {
    // A new file is made as v1 and then migrated: one path to every version, run by every test.
    db.transaction(() => {
      db.exec(schemaV1);
      db.pragma(`application_id = ${applicationId}`);
      db.pragma('user_version = 1');
    }).immediate();
  } else if (appId !== applicationId) {
    throw new ConvergeError(
      'CONVERGE_ERR_STORE_SCHEMA',
      `sqlite:${path} is a SQLite file but not a Converge event store (application_id ${appId}); refusing to touch it`,
    );
  }
  const from = db.pragma('user_version', { simple: true }) as number;
  if (from > sqliteSchemaVersion) {
    throw new ConvergeError(
      'CONVERGE_ERR_STORE_SCHEMA',
      `sqlite:${path} has store schema v${from}, written by a newer Converge; this one reads up to v${sqliteSchemaVersion}. Upgrade Converge, or restore a backup`,
      { details: { found: from, supported: sqliteSchemaVersion } },
    );
  }
  for (let v = from; v < sqliteSchemaVersion; v++) {
    const step = migrations[v];
    if (step === undefined) {
      throw new ConvergeError(
        'CONVERGE_ERR_STORE_SCHEMA',
        `sqlite:${path} has store schema v${v} and there is no migration from it to v${v + 1}`,
        {
          details: { found: from, supported: sqliteSchemaVersion },
        },
      );
    }
    db.transaction(() => {
      // Another process sharing the file may have migrated it since we looked.
      if ((db.pragma('user_version', { simple: true }) as number) !== v) return;
      step(db);
      db.pragma(`user_version = ${v + 1}`);
    }).immediate();
  }
}

/** A row as `.raw()` hands it back, in the order of `cols`: no object with named keys per row. */
type Row = [position: bigint, id: string, stream: string, revision: bigint, type: string | number, data: string, metadata: string | null];
/** The node events' types by the number the read query gives them. */
const typeNames: readonly string[] = ['', 'DeclarationSent', 'ReportReceived', 'AliveSeen'];
const at = { position: 0, id: 1, stream: 2, revision: 3, type: 4, data: 5, metadata: 6 } as const;

export function createSqliteEventStore(path: string, options: SqliteEventStoreOptions = {}): EventStore {
  const maxEventBytes = options.maxEventBytes ?? defaultMaxEventBytes;
  const readBatchSize = options.readBatchSize ?? 1000;
  const readBatchBytes = options.readBatchBytes ?? 256 * 1024;
  const pollMs = options.pollMs ?? 200;
  const key = path === ':memory:' ? `:memory:${Math.random()}` : resolve(path);

  const busyTimeoutMs = options.busyTimeoutMs ?? 5_000;
  let db: Database.Database | undefined;
  let group: boolean;
  let threaded: boolean;
  try {
    db = new Database(path);
    db.pragma(`busy_timeout = ${busyTimeoutMs}`);
    const mode = db.pragma('journal_mode = WAL', { simple: true }) as string;
    const onDisk = mode === 'wal' && path !== ':memory:' && path !== '';
    group = options.sync === 'group' && onDisk;
    threaded = options.sync === 'thread' && onDisk;
    db.pragma(`synchronous = ${group ? 'NORMAL' : (options.synchronous ?? 'FULL')}`);
    migrate(db, path);
  } catch (err) {
    if (db?.open === true) db.close();
    throw sqliteError(err, `open sqlite:${path}`);
  }
  const conn = db;
  // `thread`: this connection only reads from here on; the writer thread has its own.
  const thread: WriterClient | null = threaded ? startWriterThread({ path: resolve(path), busyTimeoutMs }) : null;

  const shared = notifiers.get(key) ?? { notifier: createNotifier(), users: 0, unsynced: new Set() };
  shared.users++;
  notifiers.set(key, shared);
  const notifier = shared.notifier;

  // Group commit (walSync.ts): commits of this handle not yet synced, oldest first, each with the
  // first position it wrote (null: it wrote no event, a checkpoint). Reads through any handle of
  // this file in this process stop before the oldest such position, so a subscriber (the relay
  // above all: it must never publish a declaration that a power loss could take back), readAll,
  // readStream and headPosition see only what is durable.
  const unsyncedCommits: { commit: number; first: bigint | null }[] = [];
  const oldestUnsynced = (): bigint | null => {
    for (const c of unsyncedCommits) if (c.first !== null) return c.first;
    return null;
  };
  const syncer: WalSyncer | null = group
    ? createWalSyncer({
        walPath: `${resolve(path)}-wal`,
        ...(options.walSync === undefined ? {} : { sync: options.walSync }),
        onDurable: (commits) => {
          let n = 0;
          while (n < unsyncedCommits.length && unsyncedCommits[n]!.commit <= commits) n++;
          const wroteEvents = unsyncedCommits.slice(0, n).some((c) => c.first !== null);
          unsyncedCommits.splice(0, n);
          if (wroteEvents) notifier.notify();
        },
      })
    : null;
  if (syncer !== null) shared.unsynced.add(oldestUnsynced);
  /** The newest position reads may return (null: no limit): one before the oldest unsynced one of any handle. */
  const readLimit = (): bigint | null => {
    let limit: bigint | null = null;
    for (const f of shared.unsynced) {
      const first = f();
      if (first !== null && (limit === null || first - 1n < limit)) limit = first - 1n;
    }
    return limit;
  };
  /** `events` (position order) cut before the first one past the read limit. */
  const durableOnly = <T extends { position: bigint }>(events: T[], limit: bigint | null = readLimit()): T[] => {
    if (limit === null || events.length === 0 || events[events.length - 1]!.position <= limit) return events;
    let n = 0;
    while (n < events.length && events[n]!.position <= limit) n++;
    return events.slice(0, n);
  };
  /** Commit made: the promise that it is durable (at once under `full`). */
  const synced = async (first: bigint | null): Promise<void> => {
    if (syncer === null) return;
    const { commit, durable } = syncer.afterCommit();
    unsyncedCommits.push({ commit, first });
    try {
      await durable;
    } catch (err) {
      throw sqliteError(err, 'sync the sqlite store');
    }
  };

  // Prepared once (pino's habit: work done when built, not on the hot path).
  // The three node events' type as a number (a REAL: safeIntegers leaves it a number) and this
  // version's metadata as NULL: no string made per row for either (decode maps them back).
  const cols =
    `position, id, stream, revision, CASE type WHEN 'AliveSeen' THEN 3.0 WHEN 'ReportReceived' THEN 2.0 WHEN 'DeclarationSent' THEN 1.0 ELSE type END, ` +
    `data, CASE WHEN metadata = '${metadataJson.replaceAll("'", "''")}' THEN NULL ELSE metadata END`;
  const q = {
    // Bounded by position in the query, not after it: the LIMIT counts durable rows only (group commit).
    forwards: conn
      .prepare(`SELECT ${cols} FROM events WHERE stream = ? AND revision >= ? AND position <= ? ORDER BY revision LIMIT ?`)
      .raw()
      .safeIntegers(),
    backwards: conn
      .prepare(`SELECT ${cols} FROM events WHERE stream = ? AND revision <= ? AND position <= ? ORDER BY revision DESC LIMIT ?`)
      .raw()
      .safeIntegers(),
    after: conn.prepare(`SELECT ${cols} FROM events WHERE position > ? ORDER BY position LIMIT ?`).raw().safeIntegers(),
    afterPrefix: conn
      .prepare(`SELECT ${cols} FROM events WHERE position > ? AND position <= ? AND substr(stream, 1, ?) = ? ORDER BY position LIMIT ?`)
      .raw()
      .safeIntegers(),
    // A prefix few events carry (`rollout-`: a handful of rollouts beside 100,000 node streams) is read
    // through the (stream, revision) index and sorted, instead of scanning the log for it: at 500,000
    // events that scan took 0.3–0.6 s of every warm start. `prefixCount` tells which prefix is rare,
    // reading at most rarePrefixRows index entries.
    afterPrefixByStream: conn
      .prepare(`SELECT ${cols} FROM events WHERE stream >= ? AND stream < ? AND +position > ? ORDER BY +position LIMIT ?`)
      .raw()
      .safeIntegers(),
    prefixCount: conn.prepare('SELECT count(*) FROM (SELECT 1 FROM events WHERE stream >= ? AND stream < ? LIMIT ?)').pluck(),
    // readColumns (nodeColumns.ts): the kind decided in SQL, whether the metadata is this version's
    // compared there, the id only of a report, integers as numbers: no type or metadata string, no
    // bigint per row. A row the fast checks do not take is read again whole (`row`).
    columns: conn
      .prepare(
        `SELECT position, revision, CASE type WHEN 'AliveSeen' THEN ${eventKind.alive} WHEN 'ReportReceived' THEN ${eventKind.report} ` +
          `WHEN 'DeclarationSent' THEN ${eventKind.send} ELSE ${eventKind.other} END, data, metadata = ?, stream, ` +
          `CASE type WHEN 'ReportReceived' THEN id END FROM events WHERE position > ? AND position <= ? ORDER BY position LIMIT ?`,
      )
      .raw(),
    row: conn.prepare('SELECT type, data, metadata, id, stream, revision FROM events WHERE position = ?').raw(),
    head: conn.prepare('SELECT max(position) FROM events').pluck().safeIntegers(),
    getCheckpoint: conn.prepare('SELECT position FROM checkpoints WHERE name = ?').pluck().safeIntegers(),
  };
  /** The write path on this thread (`full`, `group`); null when the writer thread has it. */
  const writer = thread === null ? createSqliteWriter(conn) : null;

  let closed = false;
  const open = (): void => {
    if (closed) throw storeClosed('sqlite');
  };

  // Nearly every stored event has the same metadata text; parse it once. The text this version
  // writes is compared first: a short string compare, where a Map lookup hashes the row's fresh string.
  const metadataCache = new Map<string, unknown>();
  const currentMetadata = JSON.parse(metadataJson) as unknown;
  const metadataOf = (text: string | null): unknown => {
    if (text === null || text === metadataJson) return currentMetadata;
    let meta = metadataCache.get(text);
    if (meta === undefined) {
      meta = JSON.parse(text) as unknown;
      if (metadataCache.size < 64) metadataCache.set(text, meta);
    }
    return meta;
  };
  // One object per event: the data checked (decodeFast.ts, else zod) and the Recorded built as one literal.
  const decode = (r: Row): Recorded => {
    const code = r[at.type];
    const type = typeof code === 'number' ? typeNames[code]! : code;
    return {
      type,
      data: decodeEventData(type, JSON.parse(r[at.data]), metadataOf(r[at.metadata])),
      id: r[at.id],
      stream: r[at.stream],
      revision: r[at.revision],
      position: r[at.position],
    } as Recorded;
  };

  // Events this handle appended, newest last (positions increasing), kept a while so this
  // process's live subscriptions take them as appended instead of reading them back: the
  // projection runner read and decoded (JSON.parse + zod) every event ingest had just written,
  // ~15 µs of each report in `serve` (issue 10; tmp micro-benchmark: SQL read 9, JSON.parse 3.4,
  // zod 2.5 µs an event on the shared VM). Only after a commit: a rolled-back position may be
  // handed out again. What another process or handle appended is read from the file as before,
  // and so is anything older than the window (a subscriber catching up).
  let tail: Recorded[] = [];
  const tailLimit = 4_096;

  /** Up to `limit` consecutive events after `after` from `tail`; null unless `after + 1` is there. */
  function fromTail(after: bigint, limit: number): Recorded[] | null {
    const want = after + 1n;
    const first = tail[0];
    if (first === undefined || want < first.position || want > tail[tail.length - 1]!.position) return null;
    let lo = 0;
    let hi = tail.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (tail[mid]!.position < want) lo = mid + 1;
      else hi = mid;
    }
    if (tail[lo]!.position !== want) return null;
    const out: Recorded[] = [];
    // Only a run of consecutive positions: a gap is another writer's event, read from the file.
    for (let i = lo, next = want; i < tail.length && out.length < limit && tail[i]!.position === next; i++, next++) out.push(tail[i]!);
    return out;
  }

  /**
   * Events of `types` after `after`, up to `limit`, from `tail`; null unless the tail holds every
   * position from `after + 1` to the head: only while the tail's newest event is the store's newest
   * (no other connection, process or writer of this one has appended since). The relay and the
   * rollout driver follow rare types and were woken by every append to scan the rows it had just
   * written in SQL (issue 10: ~1 µs a report in `serve`).
   */
  function fromTailOfTypes(after: bigint, limit: number, types: ReadonlySet<string>): Recorded[] | null {
    const first = tail[0];
    if (first === undefined || after + 1n < first.position) return null;
    const newest = tail[tail.length - 1]!.position;
    if ((q.head.get() as bigint | null) !== newest) return null;
    if (after >= newest) return [];
    let i = Number(after + 1n - first.position);
    // Consecutive positions only from there to the newest: a gap is another writer's event.
    if (tail[i]?.position !== after + 1n || newest - tail[i]!.position !== BigInt(tail.length - 1 - i)) return null;
    const out: Recorded[] = [];
    for (; i < tail.length && out.length < limit; i++) if (types.has(tail[i]!.type)) out.push(tail[i]!);
    return out;
  }

  const appendTx = conn.transaction((writes: ReturnType<typeof encodeWrites>): Written => {
    writer!.begin();
    return writer!.write(writes);
  });

  /**
   * What an append wrote goes on the tail, in position order (appends are answered in the order
   * they committed), as the events the caller passed with their positions and revisions.
   */
  function appended(writes: readonly StreamWrite[], written: Written): void {
    if (written.position === null) return;
    const fresh: Recorded[] = [];
    let k = 0;
    writes.forEach((w, i) => {
      let revision = written.nextExpected[i]! - BigInt(written.written[i]!);
      for (const e of w.events) {
        const position = written.positions[k++]!;
        if (position === 0n) continue;
        revision++;
        fresh.push(recorded({ type: e.type, data: e.data } as ConvergeEvent, e.id, w.stream, revision, position));
      }
    });
    tail = tail.length + fresh.length > tailLimit * 2 ? tail.slice(-tailLimit).concat(fresh) : tail.concat(fresh);
  }

  /** Decode rows until `readBatchBytes` of stored JSON (or the rows) run out; `cut` says rows were left unread. */
  function decodeUpTo(rows: IterableIterator<unknown>): { events: Recorded[]; cut: boolean } {
    const events: Recorded[] = [];
    let bytes = 0;
    for (const r of rows as IterableIterator<Row>) {
      events.push(decode(r));
      bytes += r[at.data].length;
      if (bytes >= readBatchBytes) return { events, cut: true }; // leaving for…of ends the statement's iteration
    }
    return { events, cut: false };
  }

  // One statement per set of types a subscription asks for, with the types written into the
  // SQL: SQLite uses a partial index only when the query's WHERE names the indexed value itself,
  // not a bound parameter. The names come from the closed set of event types.
  const byTypes = new Map<string, Database.Statement>();
  const typesQuery = (types: ReadonlySet<string>): Database.Statement => {
    const key = [...types].sort().join(',');
    let stmt = byTypes.get(key);
    if (stmt === undefined) {
      for (const t of types)
        if (!isEventType(t)) throw new ConvergeError('CONVERGE_ERR_BAD_REQUEST', `unknown event type ${JSON.stringify(t)}`);
      const list = [...types].sort();
      // A single indexed type: `type = '…'` lets the planner take its partial index.
      const where =
        list.length === 1 && indexedTypes.has(list[0]!) ? `type = '${list[0]!}'` : `type IN (${list.map((t) => `'${t}'`).join(', ')})`;
      stmt = conn.prepare(`SELECT ${cols} FROM events WHERE ${where} AND position > ? ORDER BY position LIMIT ?`).raw().safeIntegers();
      byTypes.set(key, stmt);
    }
    return stmt;
  };

  function readAfter(after: bigint | null, limit: number, types: ReadonlySet<string> | null = null): Recorded[] {
    open();
    const durable = readLimit();
    if (durable !== null && (after ?? 0n) >= durable) return [];
    try {
      const cached = types === null ? fromTail(after ?? 0n, limit) : fromTailOfTypes(after ?? 0n, limit, types);
      if (cached !== null) return durableOnly(cached, durable);
      // Past the tail while the writer thread is answering appends of this process: what follows
      // is those appends, committed and about to be answered, and the answer puts them on the
      // tail and wakes the subscription. Read from the file here, each was read and decoded twice
      // (bench/engine at 10,000 nodes: ~40% of a drain's events). What another process appended
      // meanwhile is past a gap in the tail once the answer lands, and read from the file then.
      // Not for a filtered read: it moves its position to the head when nothing matches.
      if (types === null && thread !== null && thread.waiting() > 0 && tail.length > 0 && (after ?? 0n) >= tail[tail.length - 1]!.position)
        return [];
      const rows = types === null ? q.after.iterate(after ?? 0n, limit) : typesQuery(types).iterate(after ?? 0n, limit);
      return durableOnly(decodeUpTo(rows).events, durable);
    } catch (err) {
      throw sqliteError(err, 'read sqlite store');
    }
  }

  /** Slow rows of a page: entry and position, decoded after the page's query is done. */
  const slowRows: number[] = [];

  /**
   * One page of readColumns into `c`: rows after `after` and up to `upTo`, at most readBatchSize rows or
   * readBatchBytes of stored JSON, those of streams outside `prefix` skipped unread. Each row is
   * checked as readAll checks it: this version's metadata and a fast check (decodeFast.ts) take
   * the parsed data as it is; any other row is read again whole and decoded by decodeEventData.
   * Returns the position of the last row looked at (0: none left; positions start at 1).
   */
  function readColumnsPage(c: NodeColumns, after: number, upTo: number, prefix: string | undefined): number {
    let n = 0;
    let lastScanned = 0;
    let bytes = 0;
    slowRows.length = 0;
    type ColumnRow = [position: number, revision: number, kind: number, data: string, current: number, stream: string, id: string | null];
    for (const r of q.columns.iterate(metadataJson, after, upTo, readBatchSize) as IterableIterator<ColumnRow>) {
      lastScanned = r[0];
      const stream = r[5];
      if (prefix !== undefined && !stream.startsWith(prefix)) continue;
      const kind = r[2];
      const text = r[3];
      bytes += text.length;
      if (kind !== eventKind.other && r[4] === 1 && putFastData(c, n, kind, JSON.parse(text), r[6] ?? '')) {
        c.position[n] = r[0];
        c.revision[n] = r[1];
        c.streamNode[n] = streamNodeOf(stream, c.node[n]!);
      } else {
        c.kind[n] = eventKind.other;
        slowRows.push(n, r[0]);
      }
      n++;
      if (bytes >= readBatchBytes) break; // leaving for…of ends the statement's iteration
    }
    // Positions climb, and a revision is at most its position: the last is the largest number here.
    exactNumber(lastScanned);
    for (let k = 0; k < slowRows.length; k += 2) {
      const at = slowRows[k + 1]!;
      const [type, text, metadata, id, stream, revision] = q.row.get(at) as [string, string, string, string, string, number];
      const data = decodeEventData(type, JSON.parse(text), metadataOf(metadata));
      putEvent(
        c,
        slowRows[k]!,
        isNodeEvent({ type, data } as Recorded) ? kindOfType(type) : eventKind.other,
        at,
        revision,
        stream,
        id,
        data,
      );
    }
    c.length = n;
    return lastScanned;
  }

  /** The commit of `append` on this thread, made now; `durable` settles once it is on disk (at once under `full`). */
  function commitNow(writes: readonly StreamWrite[]): { result: AppendResult; durable: Promise<void> } {
    open();
    const encoded = encodeWrites(writes, maxEventBytes);
    const broken = syncer?.broken() ?? null;
    if (broken !== null) throw sqliteError(broken, 'append to sqlite store');
    let written: Written;
    try {
      // IMMEDIATE takes the write lock up front: another process waits (busy_timeout) rather
      // than failing halfway through upgrading a read transaction.
      written = appendTx.immediate(encoded);
    } catch (err) {
      writer!.rolledBack();
      throw sqliteError(err, 'append to sqlite store');
    }
    writer!.committed();
    appended(writes, written);
    const result = appendResultOf(writes, written);
    let durable: Promise<void>;
    if (syncer === null) {
      if (result.position !== null) notifier.notify();
      durable = Promise.resolve();
    } else if (result.position !== null) {
      durable = synced(written.positions.find((p) => p !== 0n)!);
    } else {
      // Nothing new written: its events may be in a commit whose sync is still running.
      durable = syncer.flush().catch((err: unknown) => {
        throw sqliteError(err, 'sync the sqlite store');
      });
    }
    // Handled here too, so a caller that looks at it a turn later is not an unhandled rejection.
    durable.catch(() => undefined);
    return { result, durable };
  }

  /** `append` through the writer thread: resolves once the thread's commit holding it is on disk. */
  async function appendThreaded(writes: readonly StreamWrite[], pipeline: number): Promise<AppendResult> {
    open();
    const encoded = encodeWrites(writes, maxEventBytes);
    const written = await thread!.append(encoded, pipeline);
    if (written.position !== null && !closed) {
      appended(writes, written);
      notifier.notify();
    }
    return appendResultOf(writes, written);
  }

  let pipelines = 0;
  /**
   * EventStore.pipeline: on the writer thread its calls queue there in order (and share a
   * transaction when they wait together); on this thread each commits at its call. Either way a
   * call is refused untried once an earlier one of the pipeline failed.
   */
  function pipeline(): AppendPipeline {
    const id = ++pipelines;
    let failed: unknown = null;
    const fail = (err: unknown): never => {
      failed ??= err;
      throw err;
    };
    return {
      append(writes) {
        if (failed !== null) return Promise.reject(pipelineRefused(failed instanceof Error ? failed.message : String(failed)));
        if (thread !== null) return appendThreaded(writes, id).catch(fail);
        try {
          const { result, durable } = commitNow(writes);
          return durable.then(() => result, fail);
        } catch (err) {
          failed = err;
          return Promise.reject(err);
        }
      },
    };
  }

  const store: EventStore = {
    kind: 'sqlite',

    async append(writes) {
      if (thread !== null) return appendThreaded(writes, 0);
      const { result, durable } = commitNow(writes);
      await durable;
      return result;
    },

    pipeline,

    async readStream(stream, opts: ReadStreamOptions = {}) {
      open();
      const limit = opts.limit ?? -1; // SQLite: a negative LIMIT means none
      // Nothing past the oldest commit not yet synced (group commit); a backwards read with a
      // limit filtered after its LIMIT came back short (or empty) while durable events were left.
      const upTo = readLimit() ?? 9223372036854775807n;
      try {
        const rows =
          opts.direction === 'backwards'
            ? q.backwards.all(stream, opts.fromRevision ?? 9223372036854775807n, upTo, limit)
            : q.forwards.all(stream, opts.fromRevision ?? 0n, upTo, limit);
        return (rows as Row[]).map(decode);
      } catch (err) {
        throw sqliteError(err, `read ${stream}`);
      }
    },

    async *readAll(opts: ReadAllOptions = {}) {
      let after = opts.after ?? 0n;
      let left = opts.limit ?? Number.MAX_SAFE_INTEGER;
      const prefix = opts.streamPrefix;
      // The streams with this prefix are those in [prefix, prefixEnd) in the index's byte order.
      const last = prefix === undefined || prefix === '' ? 0x80 : prefix.charCodeAt(prefix.length - 1);
      const prefixEnd = prefix !== undefined && last < 0x7f ? prefix.slice(0, -1) + String.fromCharCode(last + 1) : null;
      let rare: boolean | null = null;
      while (left > 0) {
        open();
        const n = Math.min(left, readBatchSize);
        let batch: Recorded[];
        try {
          if (prefix === undefined) {
            batch = decodeUpTo(q.after.iterate(after, n)).events;
            if (batch.length === 0) return;
            after = batch[batch.length - 1]!.position;
          } else if (prefixEnd !== null && (rare ??= (q.prefixCount.get(prefix, prefixEnd, rarePrefixRows) as number) < rarePrefixRows)) {
            batch = decodeUpTo(q.afterPrefixByStream.iterate(prefix, prefixEnd, after, n)).events;
            if (batch.length === 0) return;
            after = batch[batch.length - 1]!.position;
          } else {
            // Scan a bounded window of positions per query, so a prefix that matches rarely
            // still reads in steps instead of one long query that blocks the event loop.
            const head = (q.head.get() as bigint | null) ?? 0n;
            if (after >= head) return;
            const hi = after + BigInt(readBatchSize * 8);
            const read = decodeUpTo(q.afterPrefix.iterate(after, hi, prefix.length, prefix, n));
            batch = read.events;
            after = batch.length === n || read.cut ? batch[batch.length - 1]!.position : hi < head ? hi : head;
          }
        } catch (err) {
          throw sqliteError(err, 'read sqlite store');
        }
        const durable = durableOnly(batch);
        if (durable.length > 0) {
          left -= durable.length;
          yield durable;
        }
        if (durable.length < batch.length) return;
      }
    },

    async *readColumns(opts = {}) {
      const prefix = opts.streamPrefix;
      let after = opts.after === undefined || opts.after === null ? 0 : Number(opts.after);
      const c = createNodeColumns(readBatchSize);
      for (;;) {
        open();
        // Nothing past the oldest commit not yet synced (group commit), as readAll.
        const limit = readLimit();
        let last: number;
        try {
          last = readColumnsPage(c, after, limit === null ? Number.MAX_SAFE_INTEGER : Number(limit), prefix);
        } catch (err) {
          throw sqliteError(err, 'read sqlite store');
        }
        if (last === 0) return;
        after = last;
        if (c.length > 0) yield c;
      }
    },

    async headPosition() {
      open();
      const head = (q.head.get() as bigint | null) ?? null;
      const limit = readLimit();
      // Positions start at 1: a limit of 0 (the first event unsynced) is an empty store.
      return limit !== null && head !== null && head > limit ? (limit > 0n ? limit : null) : head;
    },

    subscribe(opts: SubscribeOptions) {
      open();
      return createPollingSubscription(
        {
          readAfter: async (after, limit, types) => readAfter(after, limit, types),
          headPosition: () => store.headPosition(),
          getCheckpoint: (name) => store.getCheckpoint(name),
          setCheckpoint: (name, p) => store.setCheckpoint(name, p),
          notifier,
          pollMs,
        },
        opts,
      );
    },

    async getCheckpoint(name) {
      open();
      return (q.getCheckpoint.get(name) as bigint | undefined) ?? null;
    },

    async setCheckpoint(name, position) {
      open();
      if (thread !== null) return thread.setCheckpoint(name, position);
      const broken = syncer?.broken() ?? null;
      if (broken !== null) throw sqliteError(broken, `save checkpoint ${name}`);
      try {
        writer!.setCheckpoint(name, position);
      } catch (err) {
        throw sqliteError(err, `save checkpoint ${name}`);
      }
      await synced(null);
    },

    async close() {
      if (closed) return;
      closed = true;
      // What is committed gets its sync (and its appends their answer) before the file closes.
      await syncer?.close();
      shared.unsynced.delete(oldestUnsynced);
      if (--shared.users === 0) notifiers.delete(key);
      conn.close();
      // The writer thread answers what it holds, then closes its connection, the last: the final
      // checkpoint of the WAL is its, not the event loop's.
      await thread?.close();
      // Wake this handle's subscriptions so they see the store is closed and end.
      notifier.notify();
    },
  };
  return store;
}
