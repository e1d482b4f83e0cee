import type Database from 'better-sqlite3';
import { encodeWrites } from '../appendRules.ts';
import type { AppendPipeline, AppendResult, StreamWrite } from '../port.ts';
import type { Durability } from './sqliteDurability.ts';
import { sqliteError } from './sqliteErrors.ts';
import type { AppendTail } from './sqliteTail.ts';
import { appendResultOf, createSqliteWriter, pipelineRefused } from './sqliteWriter.ts';
import type { Written } from './sqliteWriter.ts';
import type { WriterClient } from './sqliteWriterClient.ts';

// The SQLite store's writes: append, EventStore.pipeline and setCheckpoint. Two ways: on the
// writer thread (sync `thread`: sqliteWriterThread.ts commits and syncs, this side waits for its
// answer), or on this thread (`full`: the sync inside COMMIT; `group`: the commit here, its WAL
// sync on a libuv thread, sqliteDurability.ts). What an append wrote goes on the tail for this
// process's subscriptions (sqliteTail.ts).

export type SqliteAppendDeps = Readonly<{
  conn: Database.Database;
  durability: Pick<Durability, 'notifier' | 'syncer' | 'synced'>;
  tail: AppendTail;
  /** The writer thread, when it has the writes (sync `thread`). */
  thread: WriterClient | null;
  /** Throws once the store is closed. */
  open: () => void;
  isClosed: () => boolean;
  maxEventBytes: number;
  /** False only for bench/audit's baseline (SqliteEventStoreOptions.auditTree). */
  auditTree: boolean;
}>;

export type SqliteAppends = Readonly<{
  append: (writes: readonly StreamWrite[]) => Promise<AppendResult>;
  pipeline: () => AppendPipeline;
  setCheckpoint: (name: string, position: bigint) => Promise<void>;
  saveLastSeen: (engine: string, flushedAt: number, nodes: readonly (readonly [string, number])[]) => Promise<void>;
}>;

export function createSqliteAppends(deps: SqliteAppendDeps): SqliteAppends {
  const { conn, durability, tail, thread, open, maxEventBytes } = deps;
  const { notifier, syncer, synced } = durability;
  /** The write path on this thread (`full`, `group`); null when the writer thread has it. */
  const writer = thread === null ? createSqliteWriter(conn, { auditTree: deps.auditTree }) : null;
  const appendTx = conn.transaction((writes: ReturnType<typeof encodeWrites>): Written => {
    writer!.begin();
    return writer!.write(writes);
  });

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
    tail.add(writes, written);
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
    // Encoded in the call, never named: V8 keeps an async function's locals across its await, and
    // these (every event's JSON) would then outlive the young generation while the writer commits.
    const written = await thread!.append(encodeWrites(writes, maxEventBytes), pipeline);
    if (written.position !== null && !deps.isClosed()) {
      tail.add(writes, written);
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

  async function append(writes: readonly StreamWrite[]): Promise<AppendResult> {
    if (thread !== null) return appendThreaded(writes, 0);
    const { result, durable } = commitNow(writes);
    await durable;
    return result;
  }

  async function setCheckpoint(name: string, position: bigint): Promise<void> {
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
  }

  async function saveLastSeen(engine: string, flushedAt: number, nodes: readonly (readonly [string, number])[]): Promise<void> {
    open();
    if (thread !== null) return thread.saveLastSeen(engine, flushedAt, nodes);
    const broken = syncer?.broken() ?? null;
    if (broken !== null) throw sqliteError(broken, 'save the last-seen lease');
    try {
      conn.transaction(() => writer!.saveLastSeen(engine, flushedAt, nodes))();
    } catch (err) {
      throw sqliteError(err, 'save the last-seen lease');
    }
    await synced(null);
  }

  return { append, pipeline, setCheckpoint, saveLastSeen };
}
