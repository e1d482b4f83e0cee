import type Database from 'better-sqlite3';
import { ConvergeError } from '../../core/errors.ts';
import type { Recorded } from '../../core/events/index.ts';
import { isEventType } from '../../core/events/index.ts';
import type { ReadAllOptions, ReadStreamOptions } from '../port.ts';
import type { Durability } from './sqliteDurability.ts';
import { sqliteError } from './sqliteErrors.ts';
import { decodeUpTo, selected } from './sqliteRows.ts';
import type { ReadQueries, Row, RowDecoder } from './sqliteRows.ts';
import { indexedTypes } from './sqliteSchema.ts';
import type { AppendTail } from './sqliteTail.ts';
import type { WriterClient } from './sqliteWriterClient.ts';

// The SQLite store's reads on the calling thread: readStream, readAll, headPosition, and the
// subscriptions' readAfter. None returns an event past the read limit (sqliteDurability.ts).

/** Below this many events a stream prefix is read through the stream index (readAll). */
const rarePrefixRows = 10_000;

export type SqliteReadDeps = Readonly<{
  conn: Database.Database;
  q: ReadQueries;
  decoder: RowDecoder;
  durability: Pick<Durability, 'readLimit' | 'durableOnly'>;
  tail: AppendTail;
  /** The writer thread, when it has the writes (sync `thread`). */
  thread: WriterClient | null;
  /** Throws once the store is closed. */
  open: () => void;
  readBatchSize: number;
  readBatchBytes: number;
}>;

export type SqliteReads = Readonly<{
  readStream: (stream: string, opts?: ReadStreamOptions) => Promise<readonly Recorded[]>;
  readAll: (opts?: ReadAllOptions) => AsyncIterable<readonly Recorded[]>;
  headPosition: () => Promise<bigint | null>;
  /** What a subscription reads next: events after `after`, up to `limit`, of `types` only when given. */
  readAfter: (after: bigint | null, limit: number, types?: ReadonlySet<string> | null) => Recorded[];
}>;

export function createSqliteReads(deps: SqliteReadDeps): SqliteReads {
  const { q, decoder, durability, tail, thread, open, readBatchSize, readBatchBytes } = deps;
  const { readLimit, durableOnly } = durability;
  const decode = (rows: IterableIterator<unknown>): { events: Recorded[]; cut: boolean } =>
    decodeUpTo(rows, decoder.decode, readBatchBytes);
  const typesQuery = createTypesQueries(deps.conn);

  function readAfter(after: bigint | null, limit: number, types: ReadonlySet<string> | null = null): Recorded[] {
    open();
    const durable = readLimit();
    if (durable !== null && (after ?? 0n) >= durable) return [];
    try {
      const cached = types === null ? tail.after(after ?? 0n, limit) : tail.afterOfTypes(after ?? 0n, limit, types);
      if (cached !== null) return durableOnly(cached, durable);
      // Past the tail while the writer thread is answering appends of this process: what follows
      // is those appends, committed and about to be answered, and the answer puts them on the
      // tail and wakes the subscription. Read from the file here, each would be read and decoded
      // twice. What another process appended meanwhile is past a gap in the tail once the answer
      // lands, and read from the file then. Not for a filtered read: it moves its position to the
      // head when nothing matches.
      const newest = tail.newest();
      if (types === null && thread !== null && thread.waiting() > 0 && newest !== null && (after ?? 0n) >= newest) return [];
      const rows = types === null ? q.after.iterate(after ?? 0n, limit) : typesQuery(types).iterate(after ?? 0n, limit);
      return durableOnly(decode(rows).events, durable);
    } catch (err) {
      throw sqliteError(err, 'read sqlite store');
    }
  }

  async function readStream(stream: string, opts: ReadStreamOptions = {}): Promise<readonly Recorded[]> {
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
      return (rows as Row[]).map(decoder.decode);
    } catch (err) {
      throw sqliteError(err, `read ${stream}`);
    }
  }

  async function* readAll(opts: ReadAllOptions = {}): AsyncIterable<readonly Recorded[]> {
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
          batch = decode(q.after.iterate(after, n)).events;
          if (batch.length === 0) return;
          after = batch[batch.length - 1]!.position;
        } else if (prefixEnd !== null && (rare ??= (q.prefixCount.get(prefix, prefixEnd, rarePrefixRows) as number) < rarePrefixRows)) {
          batch = decode(q.afterPrefixByStream.iterate(prefix, prefixEnd, after, n)).events;
          if (batch.length === 0) return;
          after = batch[batch.length - 1]!.position;
        } else {
          // Scan a bounded window of positions per query, so a prefix that matches rarely
          // still reads in steps instead of one long query that blocks the event loop.
          const head = (q.head.get() as bigint | null) ?? 0n;
          if (after >= head) return;
          const hi = after + BigInt(readBatchSize * 8);
          const read = decode(q.afterPrefix.iterate(after, hi, prefix.length, prefix, n));
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
  }

  async function headPosition(): Promise<bigint | null> {
    open();
    const head = (q.head.get() as bigint | null) ?? null;
    const limit = readLimit();
    // Positions start at 1: a limit of 0 (the first event unsynced) is an empty store.
    return limit !== null && head !== null && head > limit ? (limit > 0n ? limit : null) : head;
  }

  return { readStream, readAll, headPosition, readAfter };
}

/**
 * One statement per set of types a subscription asks for, with the types written into the SQL:
 * SQLite uses a partial index only when the query's WHERE names the indexed value itself, not a
 * bound parameter. The names come from the closed set of event types.
 */
function createTypesQueries(conn: Database.Database): (types: ReadonlySet<string>) => Database.Statement {
  const byTypes = new Map<string, Database.Statement>();
  return (types) => {
    const key = [...types].sort().join(',');
    let stmt = byTypes.get(key);
    if (stmt === undefined) {
      for (const t of types)
        if (!isEventType(t)) throw new ConvergeError('CONVERGE_ERR_BAD_REQUEST', `unknown event type ${JSON.stringify(t)}`);
      const list = [...types].sort();
      // A single indexed type: `type = '…'` lets the planner take its partial index.
      const where =
        list.length === 1 && indexedTypes.has(list[0]!) ? `type = '${list[0]!}'` : `type IN (${list.map((t) => `'${t}'`).join(', ')})`;
      stmt = conn.prepare(`SELECT ${selected} FROM events WHERE ${where} AND position > ? ORDER BY position LIMIT ?`).raw().safeIntegers();
      byTypes.set(key, stmt);
    }
    return stmt;
  };
}
