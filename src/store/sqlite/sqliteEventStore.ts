import { resolve } from 'node:path';
import Database from 'better-sqlite3';
import { defaultMaxEventBytes, storeClosed } from '../appendRules.ts';
import { createPollingSubscription } from '../pollingSubscription.ts';
import { streamOf } from '../../core/events/index.ts';
import type { EventStore, SendFound, SubscribeOptions } from '../port.ts';
import { createSqliteAppends } from './sqliteAppend.ts';
import { createSqliteAuditReads } from './sqliteAudit.ts';
import type { AuditMigrationProgress } from './sqliteAudit.ts';
import { createSqliteColumnsReader } from './sqliteColumnsFast.ts';
import { joinFile } from './sqliteDurability.ts';
import { sqliteError } from './sqliteErrors.ts';
import { createSqliteReads } from './sqliteReads.ts';
import { createSqliteStats } from './sqliteStats.ts';
import { createRowDecoder, prepareReadQueries } from './sqliteRows.ts';
import { migrate } from './sqliteSchema.ts';
import { readManifest } from './sqliteArchive.ts';
import { prepareArchivedSendQueries } from './sqliteArchivedSends.ts';
import type { ArchivedSendQueries } from './sqliteArchivedSends.ts';
import { prepareStreamFilterQuery } from './sqliteStreamFilter.ts';
import { prepareBackfillSummaries, prepareSegmentOrderQuery, prepareSegmentSummariesQuery } from './sqliteSegmentSummaries.ts';
import { createAppendTail } from './sqliteTail.ts';
import { startWriterThread } from './sqliteWriterClient.ts';
import type { WriterClient } from './sqliteWriterClient.ts';

// The embedded default store (docs/design.md#5-the-store-port). One file, WAL, and an append
// resolves only once its commit is on disk, so an acknowledged report survives power loss;
// batching (one transaction per append call) is how it gets fast, not weaker sync. Three ways
// to the disk (option `sync`, docs/store.md). This file opens the file and wires the parts:
//   sqliteSchema.ts       tables, versions, migrations;
//   sqliteRows.ts         the read statements, and rows decoded into events;
//   sqliteReads.ts        readStream, readAll, headPosition, a subscription's next read;
//   sqliteColumnsFast.ts  readColumns, read from the file (equal to readAll's events in columns);
//   sqliteAppend.ts       append, pipeline, setCheckpoint, on this thread or the writer thread's;
//   sqliteAudit.ts        the audit tree: leaf hashes, the head row, its migration and reads;
//   sqliteStats.ts        events and bytes by type and age (`converge store stats`);
//   sqliteArchive.ts      closed history moved to archive segments, and the manifest of them;
//   sqliteTail.ts         this handle's recent appends, handed to its subscriptions unread;
//   sqliteDurability.ts   what the handles of one file share: the notifier, group commit's read limit;
//   sqliteWriter*.ts, walSync.ts   the write path, the writer thread, group commit's WAL sync.

export { sqliteSchemaVersion } from './sqliteSchema.ts';

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
   * of 130 KB each took seconds of one event-loop turn. Default 256 KiB.
   */
  readBatchBytes?: number;
  /** Told how far the migration to schema v3 got in hashing the events already stored (the audit tree). */
  onAuditMigration?: AuditMigrationProgress;
  /**
   * False: appends write no leaf hash and no audit head, so the store is not tamper-evident and
   * `converge audit verify` reports its first row `unhashed`. Only the benches set it, to
   * measure what the tree costs an append (bench/audit) and ingest (bench/engine, through
   * `withoutAuditTreeKey`); no URL, flag, setting or environment variable reaches it.
   */
  auditTree?: boolean;
}>;

/**
 * Bench only: bench/engine.ts (BENCH_WITHOUT_AUDIT_TREE=1) preloads a module that sets this global into
 * one `converge serve` it starts, so ingest is measured without the tree in the same run. Only code
 * already running inside the process can set it, and such code could write the file directly.
 */
export const withoutAuditTreeKey = Symbol.for('converge.bench.withoutAuditTree');
const auditTreeDefault = (): boolean => (globalThis as Record<symbol, unknown>)[withoutAuditTreeKey] !== true;

type Opened = { conn: Database.Database; group: boolean; threaded: boolean };

/** Open the file in WAL mode with its pragmas and bring its schema to this version; `group`/`threaded`: the sync mode it can take. */
function openFile(path: string, options: SqliteEventStoreOptions, busyTimeoutMs: number): Opened {
  let db: Database.Database | undefined;
  try {
    db = new Database(path);
    db.pragma(`busy_timeout = ${busyTimeoutMs}`);
    const mode = db.pragma('journal_mode = WAL', { simple: true }) as string;
    const onDisk = mode === 'wal' && path !== ':memory:' && path !== '';
    const group = options.sync === 'group' && onDisk;
    const threaded = options.sync === 'thread' && onDisk;
    db.pragma(`synchronous = ${group ? 'NORMAL' : (options.synchronous ?? 'FULL')}`);
    migrate(db, path, options.onAuditMigration);
    return { conn: db, group, threaded };
  } catch (err) {
    if (db?.open === true) db.close();
    throw sqliteError(err, `open sqlite:${path}`);
  }
}

export function createSqliteEventStore(path: string, options: SqliteEventStoreOptions = {}): EventStore {
  const readBatchSize = options.readBatchSize ?? 1000;
  const readBatchBytes = options.readBatchBytes ?? 256 * 1024;
  const pollMs = options.pollMs ?? 200;
  const busyTimeoutMs = options.busyTimeoutMs ?? 5_000;
  const auditTree = options.auditTree ?? auditTreeDefault();
  const { conn, group, threaded } = openFile(path, options, busyTimeoutMs);
  // `thread`: this connection only reads from here on; the writer thread has its own.
  const thread: WriterClient | null = threaded ? startWriterThread({ path: resolve(path), busyTimeoutMs, auditTree }) : null;
  const durability = joinFile({
    key: path === ':memory:' ? `:memory:${Math.random()}` : resolve(path),
    walPath: group ? `${resolve(path)}-wal` : null,
    ...(options.walSync === undefined ? {} : { walSync: options.walSync }),
  });
  const { notifier } = durability;

  let closed = false;
  const open = (): void => {
    if (closed) throw storeClosed('sqlite');
  };
  const q = prepareReadQueries(conn);
  let archivedSends: ArchivedSendQueries | null = null;
  let segmentsWithout: ((stream: string) => Set<string>) | null = null;
  let segmentSummaries: ReturnType<typeof prepareSegmentSummariesQuery> | null = null;
  const decoder = createRowDecoder();
  const tail = createAppendTail(() => q.head.get() as bigint | null);
  const reads = createSqliteReads({ conn, q, decoder, durability, tail, thread, open, readBatchSize, readBatchBytes });
  const audit = createSqliteAuditReads(conn);
  const stats = createSqliteStats(conn, path);
  const readColumns = createSqliteColumnsReader({ q, decoder, durability, open, readBatchSize, readBatchBytes });
  const writes = createSqliteAppends({
    conn,
    durability,
    tail,
    thread,
    open,
    isClosed: () => closed,
    maxEventBytes: options.maxEventBytes ?? defaultMaxEventBytes,
    auditTree,
  });

  const store: EventStore = {
    kind: 'sqlite',
    append: writes.append,
    pipeline: writes.pipeline,
    readStream: reads.readStream,
    readAll: reads.readAll,
    readColumns,
    headPosition: reads.headPosition,

    async findSend(node, digest) {
      open();
      const limit = durability.readLimit();
      try {
        const row = q.findSend.get(streamOf(node), digest, limit === null ? Number.MAX_SAFE_INTEGER : limit) as SendFound | undefined;
        if (row !== undefined) return { serial: Number(row.serial), sentAt: row.sentAt };
        // Not in `events`: perhaps moved to the archive (schema v7, sqliteArchivedSends.ts).
        return (archivedSends ??= prepareArchivedSendQueries(conn)).find(streamOf(node), digest);
      } catch (err) {
        throw sqliteError(err, 'find a send in sqlite store');
      }
    },

    async auditHead() {
      open();
      try {
        return audit.auditHead();
      } catch (err) {
        throw sqliteError(err, 'read the audit head');
      }
    },

    async readStored(opts) {
      open();
      try {
        return audit.readStored(opts);
      } catch (err) {
        throw sqliteError(err, 'read stored events');
      }
    },

    async stats(opts) {
      open();
      try {
        return await stats(opts);
      } catch (err) {
        throw sqliteError(err, 'count the events of the sqlite store');
      }
    },

    async archiveManifest() {
      open();
      try {
        return readManifest(conn);
      } catch (err) {
        throw sqliteError(err, 'read the archive manifest');
      }
    },

    async archiveSegmentsWithout(stream) {
      open();
      try {
        return (segmentsWithout ??= prepareStreamFilterQuery(conn))(stream);
      } catch (err) {
        throw sqliteError(err, 'read the archive stream filters');
      }
    },

    async archiveSummaries() {
      open();
      try {
        return (segmentSummaries ??= prepareSegmentSummariesQuery(conn))();
      } catch (err) {
        throw sqliteError(err, 'read the archive segment summaries');
      }
    },

    async archiveSegmentsInOrder() {
      open();
      try {
        return prepareSegmentOrderQuery(conn)();
      } catch (err) {
        throw sqliteError(err, 'read the archive manifest');
      }
    },

    async recordArchiveSummaries(summaries) {
      open();
      try {
        prepareBackfillSummaries(conn)(summaries);
      } catch (err) {
        throw sqliteError(err, 'write the archive segment summaries');
      }
    },

    subscribe(opts: SubscribeOptions) {
      open();
      return createPollingSubscription(
        {
          readAfter: async (after, limit, types) => reads.readAfter(after, limit, types),
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

    setCheckpoint: writes.setCheckpoint,
    saveLastSeen: writes.saveLastSeen,

    async loadLastSeen() {
      open();
      try {
        const nodes = new Map<string, number>();
        for (const r of q.lastSeenNodes.all() as { node: string; ms: number }[]) nodes.set(r.node, r.ms);
        const flushes = new Map<string, number>();
        for (const r of q.lastSeenFlushes.all() as { engine: string; ms: number }[]) flushes.set(r.engine, r.ms);
        return { nodes, flushes };
      } catch (err) {
        throw sqliteError(err, 'read the last-seen lease');
      }
    },

    async close() {
      if (closed) return;
      closed = true;
      // What is committed gets its sync (and its appends their answer) before the file closes.
      await durability.close();
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
