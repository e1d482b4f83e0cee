import { receiveMessageOnPort, workerData } from 'node:worker_threads';
import type { MessagePort } from 'node:worker_threads';
import Database from 'better-sqlite3';
import type { ErrorCode } from '../../core/errors.ts';
import type { EncodedWrite } from '../appendRules.ts';
import { sqliteError } from './sqliteErrors.ts';
import { createSqliteWriter, pipelineRefused, unpackWrites } from './sqliteWriter.ts';
import type { PackedWrites, Written } from './sqliteWriter.ts';

// The SQLite store's writer thread (`sync: 'thread'`, serve's default; docs/store.md): every
// write of the process's store goes through this thread's own connection, with SQLite's
// synchronous=FULL, so the inserts, the COMMIT, its fsync and the WAL checkpoints run beside the
// event loop instead of on it (they were a third of serve's main thread in a drain).
// What is queued when the thread comes to it is written in one transaction, each call in a
// savepoint of its own: one fsync for all of them under load, and a call that fails (wrong
// expected revision) costs the others nothing. A commit is visible to the main thread's reading
// connection only once it is on disk: SQLite updates the WAL index after a FULL commit's sync.

export type WriterRequest =
  | Readonly<{ op: 'append'; id: number; pipeline: number; writes: PackedWrites }>
  | Readonly<{ op: 'checkpoint'; id: number; name: string; position: bigint }>
  | Readonly<{ op: 'lastSeen'; id: number; engine: string; flushedAt: number; nodes: readonly (readonly [string, number])[] }>
  | Readonly<{ op: 'close'; id: number }>;

export type WriterError = Readonly<{ code: ErrorCode; message: string; details?: Readonly<Record<string, unknown>> | undefined }>;

export type WriterReply =
  | Readonly<{ id: number; ok: true; written: Written | null }>
  | Readonly<{ id: number; ok: false; error: WriterError }>
  /** The thread could not open the store: every request fails with this. */
  | Readonly<{ id: 0; ok: false; error: WriterError; fatal: true }>;

export type WriterThreadData = Readonly<{ path: string; busyTimeoutMs: number; auditTree: boolean; port: MessagePort }>;

/** Events written in one transaction at most, so one commit never grows without bound under a flood. */
const groupEvents = 10_000;
/** WAL pages between two checkpoints (SQLite's default is 1,000). */
const checkpointPages = 10_000;

const { path, busyTimeoutMs, auditTree, port } = workerData as WriterThreadData;

const errorOf = (err: unknown, what: string): WriterError => {
  const e = sqliteError(err, what);
  return { code: e.code, message: e.message, details: e.details };
};

let db: Database.Database;
try {
  db = new Database(path, { fileMustExist: true });
  db.pragma(`busy_timeout = ${busyTimeoutMs}`);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  // At 10,000 nodes a commit dirties most pages of the two indexes (a report lands at a random
  // place in each), and the default checkpoint every 1,000 pages (4 MiB) copied those same pages
  // into the database after nearly every commit. Every 10,000 pages a checkpoint copies each
  // page once for ten commits (bench/engine: the thread's time a group 55 → 43 ms). Readers are
  // unaffected; the WAL file grows to about 40 MiB and is reused from its start after that.
  db.pragma(`wal_autocheckpoint = ${checkpointPages}`);
} catch (err) {
  port.postMessage({ id: 0, ok: false, error: errorOf(err, `open sqlite:${path} for writing`), fatal: true } satisfies WriterReply);
  port.close();
  process.exit(1); // this thread only
}
const conn = db;
const writer = createSqliteWriter(conn, { auditTree });

/** Pipelines (EventStore.pipeline) with a failed call: their later calls are refused untried, so none overtakes it. */
const failedPipelines = new Set<number>();
/**
 * An I/O error on a write: after a failed fsync the kernel may drop the pages it could not write
 * and report the next fsync clean (PostgreSQL's "fsyncgate", 2018), so nothing more is written
 * or acknowledged until the process reopens the store (as walSync.ts does for group commit).
 */
let broken: WriterError | null = null;

const call = conn.transaction((writes: readonly EncodedWrite[]) => writer.write(writes));
const checkpoint = conn.transaction((name: string, position: bigint) => writer.setCheckpoint(name, position));
const lastSeen = conn.transaction((engine: string, flushedAt: number, nodes: readonly (readonly [string, number])[]) =>
  writer.saveLastSeen(engine, flushedAt, nodes),
);

type Outcome = Readonly<{ ok: true; written: Written | null }> | Readonly<{ ok: false; error: WriterError }>;

/** One request inside the group's transaction, in a savepoint; a failure that ended the whole transaction is thrown on. */
function one(r: Exclude<WriterRequest, { op: 'close' }>): Outcome {
  if (r.op === 'append' && r.pipeline !== 0 && failedPipelines.has(r.pipeline)) {
    return { ok: false, error: errorOf(pipelineRefused(), 'append to sqlite store') };
  }
  try {
    if (r.op === 'append') return { ok: true, written: call(unpackWrites(r.writes)) };
    if (r.op === 'lastSeen') lastSeen(r.engine, r.flushedAt, r.nodes);
    else checkpoint(r.name, r.position);
    return { ok: true, written: null };
  } catch (err) {
    // SQLite rolls the whole transaction back on some errors (I/O, disk full): the group fails.
    if (!conn.inTransaction) throw err;
    if (r.op === 'append' && r.pipeline !== 0) failedPipelines.add(r.pipeline);
    return {
      ok: false,
      error: errorOf(
        err,
        r.op === 'append' ? 'append to sqlite store' : r.op === 'lastSeen' ? 'save the last-seen lease' : `save checkpoint ${r.name}`,
      ),
    };
  }
}

const group = conn.transaction((requests: readonly Exclude<WriterRequest, { op: 'close' }>[]): Outcome[] => {
  writer.begin();
  return requests.map(one);
});

function reply(id: number, outcome: Outcome): void {
  if (outcome.ok && outcome.written !== null) {
    const w = outcome.written;
    port.postMessage({ id, ok: true, written: w } satisfies WriterReply, [
      w.positions.buffer,
      w.nextExpected.buffer,
      w.written.buffer,
    ] as ArrayBuffer[]);
  } else port.postMessage({ id, ...outcome } satisfies WriterReply);
}

function write(requests: readonly Exclude<WriterRequest, { op: 'close' }>[]): void {
  if (requests.length === 0) return;
  let outcomes: Outcome[];
  try {
    if (broken !== null) throw broken;
    // IMMEDIATE takes the write lock up front: another process waits (busy_timeout) rather than
    // failing halfway through upgrading a read transaction.
    outcomes = group.immediate(requests);
    writer.committed();
  } catch (err) {
    writer.rolledBack();
    const error = err === broken ? broken! : errorOf(err, 'append to sqlite store');
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string' && code.startsWith('SQLITE_IOERR')) {
      broken = {
        code: 'CONVERGE_ERR_STORE_UNAVAILABLE',
        message: `${error.message}; nothing more is written or acknowledged until the process reopens the store`,
      };
    }
    for (const r of requests) if (r.op === 'append' && r.pipeline !== 0) failedPipelines.add(r.pipeline);
    outcomes = requests.map(() => ({ ok: false, error }));
  }
  requests.forEach((r, i) => reply(r.id, outcomes[i]!));
}

port.on('message', (first: WriterRequest) => {
  // Whatever else is queued now joins this transaction (up to groupEvents), in order; a close
  // ends the group and is answered after it.
  const requests: Exclude<WriterRequest, { op: 'close' }>[] = [];
  let closing: WriterRequest | null = null;
  let events = 0;
  for (let r: WriterRequest | undefined = first; r !== undefined;) {
    if (r.op === 'close') {
      closing = r;
      break;
    }
    requests.push(r);
    if (r.op === 'append') for (const n of r.writes.counts) events += n;
    if (events >= groupEvents) break;
    r = (receiveMessageOnPort(port)?.message as WriterRequest | undefined) ?? undefined;
  }
  write(requests);
  if (closing !== null) {
    conn.close();
    port.postMessage({ id: closing.id, ok: true, written: null } satisfies WriterReply);
    port.close();
  }
});
