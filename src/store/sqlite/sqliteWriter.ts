import type Database from 'better-sqlite3';
import { ConvergeError } from '../../core/errors.ts';
import { expectedRevisionHolds, wrongExpectedRevision } from '../revisionRules.ts';
import type { EncodedEvent, EncodedWrite } from '../appendRules.ts';
import type { AppendResult, ExpectedRevision } from '../port.ts';
import { createSqliteAuditWriter } from './sqliteAudit.ts';

// The write path of the SQLite store: one append call's rows inserted inside a transaction the
// caller holds, with the stream revisions it checks cached across calls. The same code writes
// inline on the event loop (sqliteEventStore.ts, `sync: 'full' | 'group'`) and on the writer
// thread (sqliteWriterThread.ts, `sync: 'thread'`), where several calls share one transaction.

/**
 * What one append call wrote, in columns (they cross to the main thread as transferred buffers):
 * per write its stream's revision after the call and the events written; per event, in call
 * order, its position (0n: skipped, its id stored already).
 */
export type Written = Readonly<{
  /** The last position written, or null if nothing new was. */
  position: bigint | null;
  nextExpected: BigInt64Array;
  written: Int32Array;
  positions: BigInt64Array;
}>;

/** The port's result of an append call, from its columns. */
export function appendResultOf(writes: readonly Readonly<{ stream: string }>[], w: Written): AppendResult {
  return {
    streams: writes.map((write, i) => ({ stream: write.stream, nextExpected: w.nextExpected[i]!, written: w.written[i]! })),
    position: w.position,
  };
}

/**
 * Encoded writes as one list of strings (per write its stream, then per event its id, type, data
 * and metadata), the events per write, and each write's expected revision: what crosses to the
 * writer thread. Structured clone of an object per event (its keys written out each time) cost
 * ~3.7 µs an event on the main thread. Joined into one string, the list was a copy of every
 * event's JSON on the engine thread's heap; cloned as a list, it is read from the strings the
 * encoding made, in less time too.
 */
export type PackedWrites = Readonly<{ parts: readonly string[]; counts: Int32Array; expected: readonly ExpectedRevision[] }>;

export function packWrites(writes: readonly EncodedWrite[]): PackedWrites {
  const counts = new Int32Array(writes.length);
  const parts: string[] = [];
  writes.forEach((w, i) => {
    counts[i] = w.events.length;
    parts.push(w.stream);
    for (const e of w.events) parts.push(e.id, e.type, e.data, e.metadata);
  });
  return { parts, counts, expected: writes.map((w) => w.expected) };
}

export function unpackWrites(p: PackedWrites): EncodedWrite[] {
  const { parts, counts } = p;
  let k = 0;
  const out: EncodedWrite[] = [];
  for (let i = 0; i < counts.length; i++) {
    const stream = parts[k++]!;
    const events: EncodedEvent[] = [];
    for (let j = 0; j < counts[i]!; j++) {
      events.push({ id: parts[k]!, type: parts[k + 1]!, data: parts[k + 2]!, metadata: parts[k + 3]! });
      k += 4;
    }
    out.push({ stream, expected: p.expected[i]!, events });
  }
  return out;
}

/** EventStore.pipeline's refusal of a call after one that failed (`why`: that failure, when it is known here). */
export const pipelineRefused = (why?: string): ConvergeError =>
  new ConvergeError(
    'CONVERGE_ERR_STORE_UNAVAILABLE',
    `append not tried: an earlier append of its pipeline failed${why === undefined ? '' : ` (${why})`}, and none may overtake it`,
  );

export type SqliteWriter = Readonly<{
  /** First thing inside a write transaction (the write lock held): forget cached revisions if another connection has committed. */
  begin: () => void;
  /**
   * Insert one call's events. Throws what the port's append rejects with (wrong expected revision,
   * an id stored in another stream); run it inside a savepoint when other calls share the transaction.
   */
  write: (writes: readonly EncodedWrite[]) => Written;
  setCheckpoint: (name: string, position: bigint) => void;
  /** EventStore.saveLastSeen: each node's time only moves forward. */
  saveLastSeen: (engine: string, flushedAt: number, nodes: readonly (readonly [string, number])[]) => void;
  /** The transaction committed: the revisions its calls wrote are the streams' from now on. */
  committed: () => void;
  /** The transaction rolled back: forget what its calls wrote. */
  rolledBack: () => void;
}>;

/**
 * `auditTree: false` writes no leaf hashes and no head: only bench/audit's baseline (the append's
 * cost without the tree) opens a store so; `converge audit verify` reports its first row `unhashed`.
 */
export function createSqliteWriter(conn: Database.Database, options: Readonly<{ auditTree?: boolean }> = {}): SqliteWriter {
  const q = {
    revision: conn.prepare('SELECT max(revision) AS r FROM events WHERE stream = ?').pluck().safeIntegers(),
    // The position is given, not left to AUTOINCREMENT: the leaf hashed before the insert covers
    // it, and an id already stored then takes no number (AUTOINCREMENT's did), so positions stay dense.
    insert: conn
      .prepare(
        'INSERT INTO events (position, id, stream, revision, type, data, metadata, leaf) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING',
      )
      .safeIntegers(),
    streamOfId: conn.prepare('SELECT stream FROM events WHERE id = ?').pluck(),
    setCheckpoint: conn.prepare(
      'INSERT INTO checkpoints (name, position) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET position = excluded.position',
    ),
    dataVersion: conn.prepare('PRAGMA data_version').pluck(),
    lastSeen: conn.prepare('INSERT INTO last_seen (node, ms) VALUES (?, ?) ON CONFLICT (node) DO UPDATE SET ms = max(ms, excluded.ms)'),
    lastFlush: conn.prepare('INSERT INTO last_seen_flushes (engine, ms) VALUES (?, ?) ON CONFLICT (engine) DO UPDATE SET ms = excluded.ms'),
  };

  // Stream revisions cached across appends: looking each one up in the (stream, revision) index
  // cost ~25% of append throughput at 300k events (bench/store.ts). Trusted only while no other
  // connection has committed: `PRAGMA data_version` changes exactly then, and is read once the
  // write lock is held. Three layers, so a call that fails (rolled back to its savepoint) or a
  // transaction that fails leaves nothing behind: the call's, the open transaction's, the committed.
  const revisions = new Map<string, bigint>();
  const inTransaction = new Map<string, bigint>();
  const inCall = new Map<string, bigint>();
  let seenVersion = -1;
  const audit = createSqliteAuditWriter(conn, options.auditTree ?? true);
  const revisionOf = (stream: string): bigint => {
    const cached = inCall.get(stream) ?? inTransaction.get(stream) ?? revisions.get(stream);
    if (cached !== undefined) return cached;
    return (q.revision.get(stream) as bigint | null) ?? -1n;
  };

  return {
    begin() {
      const version = q.dataVersion.get() as number;
      const fresh = version !== seenVersion;
      if (fresh || revisions.size > 1_000_000) {
        revisions.clear();
        seenVersion = version;
      }
      inTransaction.clear();
      audit.load(fresh);
    },

    write(writes) {
      const undo = audit.mark();
      try {
        return writeCall(writes);
      } catch (err) {
        inCall.clear();
        undo();
        throw err;
      }
    },

    setCheckpoint(name, position) {
      q.setCheckpoint.run(name, position);
    },

    saveLastSeen(engine, flushedAt, nodes) {
      for (const [node, ms] of nodes) q.lastSeen.run(node, ms);
      q.lastFlush.run(engine, flushedAt);
    },

    committed() {
      for (const [stream, revision] of inTransaction) revisions.set(stream, revision);
      inTransaction.clear();
    },

    rolledBack() {
      inCall.clear();
      inTransaction.clear();
      audit.forget();
    },
  };

  /** One call's rows and the audit tree over them (the caller's savepoint or transaction holds both). */
  function writeCall(writes: readonly EncodedWrite[]): Written {
    inCall.clear();
    let count = 0;
    for (const w of writes) count += w.events.length;
    const positions = new BigInt64Array(count);
    const nextExpected = new BigInt64Array(writes.length);
    const writtenOf = new Int32Array(writes.length);
    let position: bigint | null = null;
    let k = 0;
    for (const [i, w] of writes.entries()) {
      const current = revisionOf(w.stream);
      if (!expectedRevisionHolds(w.expected, current)) {
        // A retry whose events are all stored already (in this stream) succeeds as a no-op.
        const allStored = w.events.length > 0 && w.events.every((e) => q.streamOfId.get(e.id) === w.stream);
        if (!allStored) throw wrongExpectedRevision(w.stream, w.expected, current);
        nextExpected[i] = current;
        k += w.events.length;
        continue;
      }
      let revision = current;
      let written = 0;
      for (const e of w.events) {
        const leaf = audit.leafOf(w.stream, revision + 1n, e.type, e.data, e.metadata);
        const r = q.insert.run(audit.nextPosition(), e.id, w.stream, revision + 1n, e.type, e.data, e.metadata, leaf);
        if (r.changes === 0) {
          const storedIn = q.streamOfId.get(e.id) as string;
          if (storedIn !== w.stream) {
            throw new ConvergeError(
              'CONVERGE_ERR_DUPLICATE_EVENT_ID',
              `append: event id ${e.id} is already stored in ${storedIn}, not ${w.stream}`,
              { details: { id: e.id, stream: w.stream, storedIn } },
            );
          }
          k++;
          continue;
        }
        audit.take(leaf);
        revision++;
        written++;
        position = r.lastInsertRowid as bigint;
        positions[k++] = position;
      }
      nextExpected[i] = revision;
      writtenOf[i] = written;
      inCall.set(w.stream, revision);
    }
    for (const [stream, revision] of inCall) inTransaction.set(stream, revision);
    inCall.clear();
    if (position !== null) audit.save();
    return { position, nextExpected, written: writtenOf, positions };
  }
}
