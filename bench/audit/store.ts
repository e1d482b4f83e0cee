// The audit tree in the SQLite store (docs/audit.md), measured on a store built through the
// adapter's own append: `converge audit verify`'s walk over it against a bare SHA-256 pass over the
// same stored bytes, and the append with the tree against the same adapter with it turned off
// (SqliteEventStoreOptions.auditTree: false, which exists for this baseline only).
import { hash } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { verifyLog } from '../../src/core/audit/verifyLog.ts';
import { aliveSeenId } from '../../src/core/events/index.ts';
import type { AliveSeen, NodeEvent } from '../../src/core/events/index.ts';
import type { NewEvent, StreamWrite } from '../../src/store/index.ts';
import { pooledCheckedPages } from '../../src/store/audit/verifyPool.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import type { BenchReport } from '../support/report.ts';

const streamCount = 10_000;

/** Events spread round-robin over the streams, as ingest sees reports from a fleet (bench/store.ts's). */
function makeWrites(count: number, offset: number): StreamWrite[] {
  return Array.from({ length: count }, (_, i) => {
    const k = offset + i;
    const node = `n${k % streamCount}`;
    const seenAt = new Date(Date.UTC(2024, 0, 1) + k * 1000).toISOString();
    const event = { id: aliveSeenId(node, seenAt), type: 'AliveSeen', data: { node, seenAt } } satisfies NewEvent<NodeEvent> & AliveSeen;
    return { stream: `node-${node}`, expected: 'any', events: [event] };
  });
}

/** Append `count` events in calls of `batch` through the adapter; returns events/s. */
async function appendThrough(path: string, count: number, batch: number, auditTree: boolean): Promise<number> {
  const store = createSqliteEventStore(path, { auditTree });
  let ms = 0;
  try {
    // Made a call at a time so a million events never sit in memory at once; only the appends are timed.
    for (let at = 0; at < count; at += batch) {
      const writes = makeWrites(Math.min(batch, count - at), at);
      const t = performance.now();
      await store.append(writes);
      ms += performance.now() - t;
    }
  } finally {
    await store.close();
  }
  return count / (ms / 1000);
}

/**
 * The baseline of the walk: every row's stored bytes read in position order and hashed once, nothing
 * else. Read as verify reads them (pages of 1,000, each row's bytes one blob from SQLite) and hashed
 * with the one-shot call, so that it is the floor the walk is held to, not a slower loop. Seconds.
 */
function bareSha256Pass(path: string, expected: number): number {
  const db = new Database(path, { readonly: true });
  const t = performance.now();
  let rows = 0;
  let sink = 0;
  const page = db
    .prepare(
      'SELECT position, CAST(CAST(stream AS BLOB) || CAST(type AS BLOB) || CAST(data AS BLOB) || CAST(metadata AS BLOB) AS BLOB) ' +
        'FROM events WHERE position > ? ORDER BY position LIMIT 1000',
    )
    .raw()
    .safeIntegers() as Database.Statement<[bigint], [bigint, Buffer]>;
  for (let after = 0n; ;) {
    const got = page.all(after);
    if (got.length === 0) break;
    for (const [, bytes] of got) sink ^= hash('sha256', bytes, 'binary').charCodeAt(0);
    rows += got.length;
    after = got.at(-1)![0];
  }
  const s = (performance.now() - t) / 1000;
  db.close();
  if (rows !== expected || sink === 256) throw new Error(`the bare pass read ${rows} rows, the store holds ${expected}`);
  return s;
}

/**
 * `converge audit verify`'s walk (src/cli/commands/audit.ts), in process: the store opened, verifyLog
 * over readStored on this thread, as the command does by default, or with `threads` > 1 over pages read
 * and checked by the pool (src/store/audit/verifyPool.ts), as `--threads` asks. Seconds.
 */
async function verifyPass(path: string, expected: number, threads: number): Promise<number> {
  const t = performance.now();
  const store = createSqliteEventStore(path);
  try {
    const read = (after: bigint | null, limit: number) => store.readStored({ after, limit });
    const last = await store.headPosition();
    const pooled = threads > 1 ? { checkedPages: () => pooledCheckedPages({ url: `sqlite:${path}`, last, readTail: read, threads }) } : {};
    const result = await verifyLog({ head: () => store.auditHead(), read, ...pooled });
    if (result.finding !== null || result.events !== expected) {
      throw new Error(`the bench's store did not verify: ${result.finding?.message ?? `${result.events} events`}`);
    }
  } finally {
    await store.close();
  }
  return (performance.now() - t) / 1000;
}

export type StoreSizes = Readonly<{ events: number; appendSmall: number; appendLarge: number; passes: number }>;

export async function storeRows(report: BenchReport, dir: string, sizes: StoreSizes): Promise<void> {
  const { events, passes } = sizes;
  const path = join(dir, 'verify.db');
  const buildRate = await appendThrough(path, events, 1000, true);
  const threads = availableParallelism();
  const bare: number[] = [];
  const walk: number[] = [];
  const pooled: number[] = [];
  for (let p = 0; p < passes; p++) {
    bare.push(bareSha256Pass(path, events));
    walk.push(await verifyPass(path, events, 1));
    if (threads > 1) pooled.push(await verifyPass(path, events, threads));
  }
  const n = events.toLocaleString('en-US');
  report.row({
    name: `audit verify's walk on one thread (the default), ${n} events`,
    unit: 's',
    better: 'lower',
    converge: walk,
    baseline: bare,
    goal: { atMost: (5 * events) / 1_000_000 },
    notes: 'baseline: the same rows read in position order and one SHA-256 each over their stored bytes, on one thread',
  });
  if (threads > 1) {
    report.row({
      name: `audit verify's walk on ${threads} threads (--threads ${threads}), ${n} events`,
      unit: 's',
      better: 'lower',
      converge: pooled,
      baseline: bare,
      goal: { atMost: (5 * events) / 1_000_000 },
      notes: 'baseline: the bare one-thread SHA-256 pass above; rows read and leaves checked on a thread per core',
    });
  }

  let file = 0;
  for (const [batch, count] of [
    [100, sizes.appendSmall],
    [1000, sizes.appendLarge],
  ] as const) {
    const without: number[] = [];
    const withTree: number[] = [];
    for (let p = 0; p < passes; p++) {
      without.push(await appendThrough(join(dir, `a${file++}.db`), count, batch, false));
      withTree.push(await appendThrough(join(dir, `a${file++}.db`), count, batch, true));
    }
    report.row({
      name: `append with the tree, batches of ${batch} (${count.toLocaleString('en-US')} events)`,
      unit: 'events/s',
      converge: withTree,
      baseline: without,
      goal: { ratioAtLeast: 0.95 },
      notes: 'baseline: the same adapter with auditTree: false (no leaf hashes, no head)',
    });
  }
  report.note(
    `The ${n}-event store was built through the adapter's append (calls of 1,000 events, sync full) at ${Math.round(buildRate).toLocaleString('en-US')} events/s; ` +
      `AliveSeen events over ${streamCount.toLocaleString('en-US')} streams, as bench/store.ts appends.`,
  );
}
