import type { Pool, PoolClient, QueryConfig } from 'pg';
import { ConvergeError } from '../../core/errors.ts';
import type { EncodedWrite } from '../appendRules.ts';
import { expectedRevisionHolds, wrongExpectedRevision } from '../appendRules.ts';
import type { AppendResult } from '../port.ts';
import { queryTimedOut } from './connection.ts';
import { statementName } from './schema.ts';

// Appending to PostgreSQL without ever letting a reader skip an event (the trap every such store meets).
//
// The trap: a sequence hands out positions when a row is inserted, but transactions commit in
// their own order. If T1 takes position 7 and T2 takes 8 and commits first, a reader that saw 8
// resumes "after 8" and never sees 7. Two known ways out:
// - keep concurrent commits and read only below a high-water mark: rows carry their
//   transaction id (xid8) and readers stop at pg_snapshot_xmin(pg_current_snapshot()). The
//   order is then (xid, sequence), a pair that does not fit the port's one bigint position and
//   checkpoint, and every reader waits for the oldest running write transaction in the whole
//   database, Converge's or not;
// - serialise appends so that positions are handed out in commit order. Chosen here.
//
// Every append is one statement that first updates the one-row `head` counter and takes its
// positions from the value it read. The row lock it takes is held until commit, and PostgreSQL
// makes a transaction visible before it releases its locks, so the next appender can only read
// the counter once the previous one is committed and visible: commit order is position order, a
// reader that sees position P sees everything below it, and positions are dense (a rolled-back
// append rolls its counter update back too). The same holds on a hot standby, which replays
// commits in WAL order, and that is this order too.
//
// The cost is that appends commit one at a time. Converge has one active writer that matters
// (the ingest, single-active-consumer on mesh.reports, batching hundreds of reports into one
// append), so there is little concurrency to lose; bench/store.ts measures the single-writer
// rate against a raw insert loop, and test/store/postgresNoSkip.test.ts runs concurrent
// appenders against a subscriber and shows a plain sequence skipping under the same load.
//
// Expected revisions and idempotency cost no extra round trip in the common case: the statement
// computes each stream's head itself and an unmet expectation turns the row's revision into NULL,
// which the NOT NULL constraint rejects, so the whole statement fails and writes nothing. A
// retried event id or a head that moved fails it on a unique constraint. On any of these the
// append takes the careful path: lock the counter, read the heads and stored ids, and apply the
// shared rules (../appendRules.ts) exactly as the SQLite adapter does.

type Query = (config: QueryConfig) => Promise<{ rows: unknown[][] }>;

/**
 * The INSERT's rows as the columns it binds (built as arrays directly: the per-event objects and
 * seven maps over them were a third of the client's cost of an append of 100). `expect`: the head
 * the row's stream must have had before the call (null: any); `off`: the row's place after it.
 */
type Rows = {
  id: string[];
  stream: string[];
  type: string[];
  data: string[];
  metadata: string[];
  expect: (string | null)[];
  off: number[];
  /** The stream's head as this process last wrote it (null: the statement looks it up). */
  base: (string | null)[];
};
const noRows = (): Rows => ({ id: [], stream: [], type: [], data: [], metadata: [], expect: [], off: [], base: [] });
const push = (
  rows: Rows,
  stream: string,
  e: EncodedWrite['events'][number],
  expect: bigint | null,
  off: number,
  base: bigint | undefined,
): void => {
  rows.base.push(base === undefined ? null : String(base));
  rows.id.push(e.id);
  rows.stream.push(stream);
  rows.type.push(e.type);
  rows.data.push(e.data);
  rows.metadata.push(e.metadata);
  rows.expect.push(expect === null ? null : String(expect));
  rows.off.push(off);
};

export type Appender = Readonly<{ append: (writes: readonly EncodedWrite[]) => Promise<AppendResult> }>;

export function createAppender(pool: Pool, schema: string, queryOf: (c: PoolClient | Pool) => Query): Appender {
  const s = schema;
  const statement =
    (name: string, text: string) =>
    (values: unknown[]): QueryConfig => ({ name: statementName(name, s), text, values });

  const insert = statement(
    'append',
    `WITH batch AS MATERIALIZED (
       SELECT u.ord, u.id, u.stream, u.type, u.data, u.metadata, u.expect, u.off,
              coalesce(u.base, (SELECT e.revision FROM ${s}.events e WHERE e.stream = u.stream ORDER BY e.revision DESC LIMIT 1), -1) AS head
       FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int8[], $7::int8[], $9::int8[])
            WITH ORDINALITY AS u(id, stream, type, data, metadata, expect, off, base, ord)
     ), claimed AS (
       UPDATE ${s}.head SET position = position + $8::int8 RETURNING position - $8::int8 AS base
     ), written AS (
       INSERT INTO ${s}.events (position, id, stream, revision, type, data, metadata)
       SELECT c.base + b.ord, b.id, b.stream,
              CASE WHEN b.expect IS NULL OR b.expect = b.head THEN b.head + 1 + b.off END,
              b.type, b.data::json, b.metadata::json
       FROM claimed c CROSS JOIN batch b
       RETURNING stream, revision, position
     )
     SELECT stream, max(revision), max(position) FROM written GROUP BY stream`,
  );
  const lockHead = statement('lock_head', `SELECT position FROM ${s}.head FOR UPDATE`);
  const readHeads = statement(
    'heads',
    `SELECT x, (SELECT e.revision FROM ${s}.events e WHERE e.stream = x ORDER BY e.revision DESC LIMIT 1) FROM unnest($1::text[]) x`,
  );
  const stored = statement('stored', `SELECT id, stream FROM ${s}.events WHERE id = ANY($1::uuid[])`);

  const params = (r: Rows): unknown[] => [r.id, r.stream, r.type, r.data, r.metadata, r.expect, r.off, r.id.length, r.base];

  // Each stream's last revision as this process last wrote it, so the statement need not look it
  // up (an index probe per event). It may be stale when another engine wrote since, never ahead:
  // revisions are dense, so a stale head makes the row collide on (stream, revision) and the
  // append takes the careful path, which reads the truth and refreshes this.
  const heads = new Map<string, bigint>();
  const learn = (stream: string, revision: bigint): void => {
    if (heads.size >= 200_000) heads.clear();
    heads.set(stream, revision);
  };

  async function careful(writes: readonly EncodedWrite[]): Promise<AppendResult> {
    const client = await pool.connect();
    const q = queryOf(client);
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      try {
        // Holding the counter's lock, nobody else appends: what we read next stays true until COMMIT.
        await q(lockHead([]));
        const streams = [...new Set(writes.map((w) => w.stream))];
        const ids = writes.flatMap((w) => w.events.map((e) => e.id));
        const headRows = (await q(readHeads([streams]))).rows;
        const storedRows = ids.length === 0 ? [] : (await q(stored([ids]))).rows;
        for (const w of writes) heads.delete(w.stream);
        const plan = planWithFacts(
          writes,
          new Map(headRows.map((r) => [r[0] as string, (r[1] as bigint | null) ?? -1n])),
          new Map(storedRows.map((r) => [r[0] as string, r[1] as string])),
        );
        let position: bigint | null = null;
        if (plan.rows.id.length > 0) {
          for (const r of (await q(insert(params(plan.rows)))).rows) {
            const p = r[2] as bigint;
            if (position === null || p > position) position = p;
          }
        }
        await client.query('COMMIT');
        for (const r of plan.streams) if (r.nextExpected >= 0n) learn(r.stream, r.nextExpected);
        return { streams: plan.streams, position };
      } catch (err) {
        // A connection that did not answer in time would not answer the ROLLBACK either: dropping
        // it rolls the transaction back on the server.
        if (queryTimedOut(err)) broken = err as Error;
        else
          await client.query('ROLLBACK').catch((e: unknown) => {
            broken = e as Error;
          });
        throw err;
      }
    } finally {
      client.release(broken);
    }
  }

  return {
    append: async (writes) => {
      const rows = planWithoutFacts(writes, heads);
      if (rows === null) return careful(writes);
      let result: { rows: unknown[][] };
      try {
        result = await queryOf(pool)(insert(params(rows)));
      } catch (err) {
        if (missedAssumption(err)) return careful(writes);
        throw err;
      }
      for (const r of result.rows) learn(r[0] as string, r[1] as bigint);
      return resultOf(writes, result.rows);
    },
  };
}

/** The statement failed because a head or an id was not what the one-statement plan assumed. */
const missedAssumption = (err: unknown): boolean => {
  const e = err as { code?: unknown; column?: unknown };
  return (e.code === '23502' && e.column === 'revision') || e.code === '23505';
};

/**
 * The one-statement plan, when the call can be checked by the statement alone: each write has
 * events and expects `any`, `no_stream` or an exact revision. `expect` is the head the stream
 * must have had before the call, so a second write to a stream in the same call counts the
 * first one's events. Null: the rules (a later `no_stream`, a zero-event write, `stream_exists`)
 * need the facts read first.
 */
export function planWithoutFacts(writes: readonly EncodedWrite[], heads: ReadonlyMap<string, bigint> = new Map()): Rows | null {
  const rows = noRows();
  const before = new Map<string, number>();
  for (const w of writes) {
    if (w.events.length === 0) return null;
    const count = before.get(w.stream) ?? 0;
    let expect: bigint | null;
    if (w.expected === 'any') expect = null;
    else if (w.expected === 'no_stream') {
      if (count > 0) return null;
      expect = -1n;
    } else if (typeof w.expected === 'bigint') {
      expect = w.expected - BigInt(count);
      if (expect < -1n) return null;
    } else return null;
    const base = heads.get(w.stream);
    for (let j = 0; j < w.events.length; j++) push(rows, w.stream, w.events[j]!, expect, count + j, base);
    before.set(w.stream, count + w.events.length);
  }
  return rows;
}

/** Per-write results from the statement's rows: [stream, last revision written, last position]. */
function resultOf(writes: readonly EncodedWrite[], rows: readonly unknown[][]): AppendResult {
  const last = new Map<string, bigint>();
  let position: bigint | null = null;
  for (const r of rows) {
    last.set(r[0] as string, r[1] as bigint);
    const p = r[2] as bigint;
    if (position === null || p > position) position = p;
  }
  const total = new Map<string, bigint>();
  for (const w of writes) total.set(w.stream, (total.get(w.stream) ?? 0n) + BigInt(w.events.length));
  const done = new Map<string, bigint>();
  const streams = writes.map((w) => {
    const base = last.get(w.stream)! - total.get(w.stream)!;
    const through = (done.get(w.stream) ?? 0n) + BigInt(w.events.length);
    done.set(w.stream, through);
    return { stream: w.stream, nextExpected: base + through, written: w.events.length };
  });
  return { streams, position };
}

/**
 * The careful plan: the SQLite adapter's rules over facts read under the counter's lock. `heads`
 * holds each stream's last revision (-1n: none); `stored` maps event ids already stored to their
 * stream. Rows carry the head they were planned on, so the statement still checks it.
 */
export function planWithFacts(
  writes: readonly EncodedWrite[],
  heads: ReadonlyMap<string, bigint>,
  stored: ReadonlyMap<string, string>,
): { rows: Rows; streams: AppendResult['streams'][number][] } {
  const rows = noRows();
  const streams: AppendResult['streams'][number][] = [];
  const current = new Map(heads);
  const storedIn = (id: string): string | undefined => stored.get(id.toLowerCase());
  for (const w of writes) {
    const base = heads.get(w.stream) ?? -1n;
    const head = current.get(w.stream) ?? -1n;
    if (!expectedRevisionHolds(w.expected, head)) {
      // A retry whose events are all stored already (in this stream) succeeds as a no-op.
      const allStored = w.events.length > 0 && w.events.every((e) => storedIn(e.id) === w.stream);
      if (!allStored) throw wrongExpectedRevision(w.stream, w.expected, head);
      streams.push({ stream: w.stream, nextExpected: head, written: 0 });
      continue;
    }
    let revision = head;
    let written = 0;
    for (const e of w.events) {
      const where = storedIn(e.id);
      if (where !== undefined) {
        if (where !== w.stream) {
          throw new ConvergeError(
            'CONVERGE_ERR_DUPLICATE_EVENT_ID',
            `append: event id ${e.id} is already stored in ${where}, not ${w.stream}`,
            {
              details: { id: e.id, stream: w.stream, storedIn: where },
            },
          );
        }
        continue;
      }
      revision++;
      written++;
      push(rows, w.stream, e, base, Number(revision - base - 1n), base);
    }
    current.set(w.stream, revision);
    streams.push({ stream: w.stream, nextExpected: revision, written });
  }
  return { rows, streams };
}
