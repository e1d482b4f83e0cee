import type { Pool, PoolClient, QueryConfig } from 'pg';
import { ConvergeError } from '../../core/errors.ts';
import type { Recorded } from '../../core/events/index.ts';
import { isEventType, streamOf } from '../../core/events/index.ts';
import type { ConvergeEvent } from '../../core/events/index.ts';
import { decodeStoredData } from '../decodeStored.ts';
import { defaultMaxEventBytes, encodeWrites, recorded, storeClosed } from '../appendRules.ts';
import { createNotifier } from '../notifier.ts';
import { columnsFromReadAll } from '../nodeColumns.ts';
import { createPollingSubscription } from '../pollingSubscription.ts';
import type { EventStore, LeaseHold, ReadAllOptions, ReadStreamOptions, SubscribeOptions } from '../port.ts';
import { createAppender } from './append.ts';
import { eventColumns, postgresStatements, statementOn } from './statements.ts';
import type { Statement } from './statements.ts';
import { acquirePostgresLease } from './lease.ts';
import type { LeaseOptions } from './lease.ts';
import { postgresStats } from './stats.ts';
import { channelOf, migrate } from './schema.ts';
import { listenForAppends } from './wakeups.ts';
import { clientFor } from './hosts.ts';
import { bucketOf } from '../archive/streamFilter.ts';
import { readPostgresManifest } from './archived.ts';
import { segmentsWithout } from './streamFilter.ts';
import { backfillSummariesQuery } from './segmentSummaries.ts';
import { summariesOfRows } from '../archive/storedSummaries.ts';
import type { StoredSummaryRow } from '../archive/storedSummaries.ts';
import { boundedPool, connectingWithin, connectionLost, defaultConnectTimeoutMs, pgError, postgresConnection } from './connection.ts';
import type { Wakeups } from './wakeups.ts';

export { parsePostgresUrl } from './connection.ts';

// The PostgreSQL adapter: a store several engines can share. node-postgres (`pg`):
// named prepared statements, a pool, and a plain Client for LISTEN. Appends are one statement
// each (./append.ts, which also explains why a reader "after position P" can never skip);
// subscriptions are the shared polling loop woken by LISTEN/NOTIFY, with a slow poll kept only as
// a safety net. Durability is the server's: an append is acknowledged when its COMMIT returns,
// so with synchronous_commit = on (PostgreSQL's default) it is on disk.

export type PostgresEventStoreOptions = Readonly<{
  maxEventBytes?: number;
  /** Schema holding the tables; the URL's `?schema=` sets it too. Default `converge`. */
  schema?: string;
  /** Safety poll for subscriptions, in case a NOTIFY is lost (ms). */
  pollMs?: number;
  /** Events per read query in readAll and subscriptions. */
  readBatchSize?: number;
  /** Connections in the pool (the LISTEN connection is one more, and each lease held one more). */
  poolSize?: number;
  lease?: LeaseOptions;
  /** `application_name` of every connection (default `converge`): what pg_stat_activity shows an operator. */
  applicationName?: string;
  /** How long a pooled statement may wait for its answer before its connection is dropped (ms; ./connection.ts). */
  queryTimeoutMs?: number;
  /** How long opening a pooled connection may take (ms). */
  connectTimeoutMs?: number;
}>;

type Row = [position: bigint, id: string, stream: string, revision: bigint, type: string, data: string, metadata: string];

export function createPostgresEventStore(url: string, options: PostgresEventStoreOptions = {}): EventStore {
  const { schema, clientConfig } = postgresConnection(url, options);
  const maxEventBytes = options.maxEventBytes ?? defaultMaxEventBytes;
  const readBatchSize = options.readBatchSize ?? 1000;
  const pollMs = options.pollMs ?? 2_000;
  // One host, or a primary and its standbys (./hosts.ts): every connection goes to the writable one.
  // Every connection, pooled or not (the schema's, the lease's, LISTEN's), is opened within one bound.
  const Connecting = connectingWithin(clientFor(clientConfig), options.connectTimeoutMs ?? defaultConnectTimeoutMs);
  const poolSize = options.poolSize ?? 4;
  const pool: Pool = boundedPool(clientConfig, Connecting, poolSize, options);
  // An idle pooled connection that breaks (server restart) is dropped by the pool and reported
  // here; the next query opens a new one, and a failing query reports STORE_UNAVAILABLE itself.
  pool.on('error', () => undefined);
  // The pool listens for errors only while a connection is idle: one that breaks while checked
  // out (terminated mid-transaction) would emit an 'error' nobody handles and end the process.
  // Its query fails and reports the error; this listener only keeps the event from escaping.
  pool.on('connect', (client) => client.on('error', () => undefined));

  const s = schema;
  const queryOf =
    (c: Pool | PoolClient) =>
    (config: QueryConfig): Promise<{ rows: unknown[][] }> =>
      c.query({ ...config, rowMode: 'array' });
  const run = queryOf(pool);
  const q = postgresStatements(s);
  const statement = statementOn(s);
  const appender = createAppender(pool, s, queryOf);

  let closed = false;
  const closing = new AbortController();
  const holds = new Set<LeaseHold>();
  let ready: Promise<void> | null = null;
  /** Create or check the schema once, before the first use; a failure is retried by the next call. */
  const open = async (): Promise<void> => {
    if (closed) throw storeClosed('postgres');
    // A connection of its own, without the pool's bound on statements: a migration may rewrite
    // every event, or wait for another engine's under the migration lock.
    ready ??= (async () => {
      const client = new Connecting(clientConfig);
      client.on('error', () => undefined);
      try {
        await client.connect();
        await migrate(client, s);
      } finally {
        await client.end().catch(() => undefined);
      }
    })().catch((err: unknown) => {
      ready = null;
      throw pgError(err, `open postgres schema ${s}`);
    });
    await ready;
  };
  /**
   * Open, run, and report failures with the store's codes. A connection the server had ended
   * fails once and leaves the pool, so after at most `poolSize` such failures the pool opens a
   * fresh one. Every statement here may run twice: a read trivially, an append because its event
   * ids make a second try of a committed append a no-op (./append.ts).
   */
  async function use<T>(what: string, fn: () => Promise<T>): Promise<T> {
    await open();
    for (let attempt = 0; ; attempt++) {
      try {
        return await fn();
      } catch (err) {
        if (closed) throw storeClosed('postgres');
        if (attempt < poolSize && connectionLost(err)) continue;
        throw pgError(err, what);
      }
    }
  }

  const notifier = createNotifier();
  let wakeups: Wakeups | null = null;
  /** Each live subscription's onError: a lost LISTEN connection is news to all of them. */
  const reporters = new Set<(err: unknown) => void>();

  // Nearly every stored event has the same metadata text; parse it once.
  const metadataCache = new Map<string, unknown>();
  const decode = (r: Row): Recorded => {
    let meta = metadataCache.get(r[6]);
    if (meta === undefined) {
      meta = JSON.parse(r[6]) as unknown;
      if (metadataCache.size < 64) metadataCache.set(r[6], meta);
    }
    const at = { position: r[0], stream: r[2], id: r[1] };
    return recorded({ type: r[4], data: decodeStoredData(r[4], JSON.parse(r[5]), meta, at) } as ConvergeEvent, r[1], r[2], r[3], r[0]);
  };
  const decodeAll = (rows: unknown[][]): Recorded[] => (rows as Row[]).map(decode);

  // A subscription's type filter (the relay's DeclarationSent) is one statement per set of
  // types, with the names written into the SQL: PostgreSQL uses the partial index of
  // DeclarationSent (./schema.ts) only when the query names the indexed value, which a generic
  // plan over a bound parameter does not. The names come from the closed set of event types.
  const byTypes = new Map<string, Statement>();
  const typesQuery = (types: ReadonlySet<string>): Statement => {
    const list = [...types].sort();
    const key = list.join(',');
    let stmt = byTypes.get(key);
    if (stmt === undefined) {
      for (const t of list)
        if (!isEventType(t)) throw new ConvergeError('CONVERGE_ERR_BAD_REQUEST', `unknown event type ${JSON.stringify(t)}`);
      const where = list.length === 1 ? `type = '${list[0]!}'` : `type IN (${list.map((t) => `'${t}'`).join(', ')})`;
      stmt = statement(
        `after_${list.join('_')}`,
        `SELECT ${eventColumns} FROM ${s}.events WHERE ${where} AND position > $1 ORDER BY position LIMIT $2`,
      );
      byTypes.set(key, stmt);
    }
    return stmt;
  };

  const readAfter = (after: bigint | null, limit: number, types: ReadonlySet<string> | null): Promise<Recorded[]> =>
    use('read postgres store', async () =>
      decodeAll((await run((types === null ? q.after : typesQuery(types))(String(after ?? 0n), limit))).rows),
    );

  const store: EventStore = {
    kind: 'postgres',

    async append(writes) {
      await open();
      const encoded = encodeWrites(writes, maxEventBytes);
      const result = await use('append to postgres store', () => appender.append(encoded));
      if (result.position !== null) notifier.notify();
      return result;
    },

    readStream: (stream, opts: ReadStreamOptions = {}) =>
      use(`read ${stream}`, async () => {
        const limit = opts.limit ?? null;
        const rows =
          opts.direction === 'backwards'
            ? await run(q.backwards(stream, String(opts.fromRevision ?? 9223372036854775807n), limit))
            : await run(q.forwards(stream, String(opts.fromRevision ?? 0n), limit));
        return decodeAll(rows.rows);
      }),

    async *readAll(opts: ReadAllOptions = {}) {
      let after = opts.after ?? 0n;
      let left = opts.limit ?? Number.MAX_SAFE_INTEGER;
      const prefix = opts.streamPrefix;
      while (left > 0) {
        const n = Math.min(left, readBatchSize);
        const batch = await use('read postgres store', async () =>
          decodeAll((await run(prefix === undefined ? q.after(String(after), n) : q.afterPrefix(String(after), prefix, n))).rows),
        );
        if (batch.length === 0) return;
        after = batch[batch.length - 1]!.position;
        left -= batch.length;
        yield batch;
        if (batch.length < n) return;
      }
    },

    // The definition (nodeColumns.ts). `this`, not the store: a wrapper that replaces readAll
    // (`{ ...store, readAll }`) has its own readAll read, as readNodeColumns always did.
    readColumns(opts) {
      return columnsFromReadAll(this, opts);
    },

    headPosition: () =>
      use('read postgres head', async () => {
        const p = (await run(q.head())).rows[0]?.[0] as bigint | undefined;
        return p === undefined || p === 0n ? null : p;
      }),

    findSend: (node, digest) =>
      use('find a send in postgres store', async () => {
        const row = (await run(q.findSend(streamOf(node), digest))).rows[0] as [string, string] | undefined;
        return row === undefined ? null : { serial: Number(row[0]), sentAt: row[1] };
      }),

    archiveManifest: () => use('read the archive manifest of the postgres store', () => readPostgresManifest(run, q.manifest())),

    archiveSegmentsWithout: (stream) =>
      use('read the archive stream filters of the postgres store', async () =>
        segmentsWithout((await run(q.filterParts(bucketOf(stream)))).rows, stream),
      ),

    archiveSummaries: () =>
      use('read the archive segment summaries of the postgres store', async () =>
        summariesOfRows((await run(q.summaries())).rows as unknown as StoredSummaryRow[]),
      ),

    archiveSegmentsInOrder: () =>
      use('read the archive manifest of the postgres store', async () => (await run(q.segmentOrder())).rows.map((r) => r[0] as string)),

    recordArchiveSummaries: (summaries) =>
      use('write the archive segment summaries of the postgres store', async () => {
        if (summaries.size > 0) await run(backfillSummariesQuery(s, summaries));
      }),

    auditHead: () =>
      use('read postgres audit head', async () => {
        const [size, root, denseFrom] = (await run(q.auditHead())).rows[0] as [bigint, Buffer, bigint];
        return { size: BigInt(size), root: root.toString('hex'), denseFrom: BigInt(denseFrom), keptByStore: true };
      }),

    saveLastSeen: (engine, flushedAt, nodes) =>
      use('save the last-seen lease', async () => {
        await run(
          q.saveLastSeen(
            engine,
            flushedAt,
            nodes.map(([n]) => n),
            nodes.map(([, ms]) => ms),
          ),
        );
      }),

    loadLastSeen: () =>
      use('read the last-seen lease', async () => {
        const nodes = new Map<string, number>();
        for (const [node, ms] of (await run(q.lastSeenNodes())).rows as [string, bigint | string][]) nodes.set(node, Number(ms));
        const flushes = new Map<string, number>();
        for (const [engine, ms] of (await run(q.lastSeenFlushes())).rows as [string, bigint | string][]) flushes.set(engine, Number(ms));
        return { nodes, flushes };
      }),

    readStored: (opts = {}) =>
      use('read postgres store', async () =>
        (await run(q.readStored(String(opts.after ?? 0n), opts.limit ?? readBatchSize))).rows.map((row) => {
          const [position, id, stream, revision, type, data, metadata, leaf] = row as [
            bigint,
            string,
            string,
            bigint,
            string,
            Buffer,
            Buffer,
            Buffer | null,
          ];
          return { position: BigInt(position), id, stream, revision: BigInt(revision), type, data, metadata, leafHash: leaf };
        }),
      ),

    stats: (opts) => use('count the events of the postgres store', () => postgresStats(run, q, s, opts)),

    subscribe(opts: SubscribeOptions) {
      if (closed) throw storeClosed('postgres');
      wakeups ??= listenForAppends(Connecting, clientConfig, channelOf(s), notifier, (err) => {
        const e = pgError(err, 'LISTEN for appends (subscriptions fall back to polling until it is back)');
        for (const report of reporters) report(e);
      });
      const report = (err: unknown): void => opts.onError?.(err);
      if (opts.onError !== undefined) reporters.add(report);
      const sub = createPollingSubscription(
        {
          readAfter,
          headPosition: () => store.headPosition(),
          getCheckpoint: (name) => store.getCheckpoint(name),
          setCheckpoint: (name, p) => store.setCheckpoint(name, p),
          notifier,
          pollMs,
        },
        opts,
      );
      return {
        ...sub,
        stop: async () => {
          reporters.delete(report);
          await sub.stop();
        },
      };
    },

    getCheckpoint: (name) =>
      use(`read checkpoint ${name}`, async () => ((await run(q.getCheckpoint(name))).rows[0]?.[0] as bigint | undefined) ?? null),

    setCheckpoint: (name, position) =>
      use(`save checkpoint ${name}`, async () => {
        await run(q.setCheckpoint(name, String(position)));
      }),

    async acquireLease(name, signal) {
      if (closed) throw storeClosed('postgres');
      await open();
      // A store closing gives up whatever it holds or waits for.
      const stop = AbortSignal.any([signal, closing.signal]);
      const hold = await acquirePostgresLease(Connecting, clientConfig, s, name, stop, options.lease);
      if (hold !== null && closed) {
        // close() ran while the lock was being taken: it has already released what it knew of.
        await hold.release();
        return null;
      }
      if (hold !== null) {
        holds.add(hold);
        void hold.lost.then(() => holds.delete(hold));
      }
      return hold;
    },

    async close() {
      if (closed) return;
      closed = true;
      closing.abort();
      for (const hold of holds) await hold.release();
      await wakeups?.stop();
      await ready?.catch(() => undefined);
      await pool.end();
      // Wake this handle's subscriptions so they see the store is closed and end.
      notifier.notify();
    },
  };
  return store;
}
