// Store benchmark, PostgreSQL rows (bench/store.ts has SQLite's): Converge's adapter
// against a raw `pg` insert loop and against Emmett's PostgreSQL event store, on the same server,
// the same events, in the same run, alternating passes. Durability is the same on every side: each
// append call is one transaction acknowledged when its COMMIT returns, under the server's
// synchronous_commit (printed; on by default) with fsync on.
// Run: npm run bench -- storePostgres   (CONVERGE_BENCH_SCALE=0.2 for a quick look;
//      CONVERGE_BENCH_POSTGRES_URL, default postgres://postgres@127.0.0.1:5432/test)
import { randomBytes } from 'node:crypto';
import { dumbo } from '@event-driven-io/dumbo';
import { getPostgreSQLEventStore, readMessagesBatch } from '@event-driven-io/emmett-postgresql';
import pg from 'pg';
import { aliveSeenId } from '../src/core/events/index.ts';
import type { AliveSeen, NodeEvent } from '../src/core/events/index.ts';
import type { NewEvent, StreamWrite } from '../src/store/index.ts';
import { createPostgresEventStore } from '../src/store/postgres/index.ts';
import { createBenchReport } from './support/report.ts';

const scale = Number(process.env.CONVERGE_BENCH_SCALE ?? 1);
const serverUrl = process.env.CONVERGE_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const streamCount = 10_000;
const tag = randomBytes(3).toString('hex');

const admin = new pg.Client({ connectionString: serverUrl });
await admin.connect();
/** Drop what this run made, however it ends. */
async function cleanUp(): Promise<void> {
  for (const s of schemas) await admin.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`);
  for (const d of databases) await admin.query(`DROP DATABASE IF EXISTS ${d} WITH (FORCE)`);
  await admin.end();
}
const setting = async (name: string): Promise<string> => String((await admin.query(`SHOW ${name}`)).rows[0][name]);
const settings = `synchronous_commit=${await setting('synchronous_commit')}, fsync=${await setting('fsync')}, wal_sync_method=${await setting('wal_sync_method')}`;

/** Scratch schemas and databases made here, dropped at the end. */
const schemas: string[] = [];
const databases: string[] = [];
const withParam = (url: string, key: string, value: string): string => {
  const u = new URL(url);
  u.searchParams.set(key, value);
  return u.toString();
};
/** A Converge store in a fresh schema, created before the clock starts. */
async function freshConverge(): Promise<{ url: string; schema: string }> {
  const schema = `bench_pg_${tag}_${schemas.length}`;
  schemas.push(schema);
  const url = withParam(serverUrl, 'schema', schema);
  const store = createPostgresEventStore(url);
  await store.headPosition();
  await store.close();
  return { url, schema };
}
/** A fresh database for Emmett, whose tables live in `public` under fixed names. */
async function freshDatabase(): Promise<string> {
  const name = `bench_emmett_${tag}_${databases.length}`;
  databases.push(name);
  await admin.query(`CREATE DATABASE ${name}`);
  const u = new URL(serverUrl);
  u.pathname = `/${name}`;
  return u.toString();
}

/** Events spread round-robin over the streams, as ingest sees reports from a fleet. */
function makeEvents(count: number, offset: number): NewEvent<NodeEvent>[] {
  return Array.from({ length: count }, (_, i) => {
    const k = offset + i;
    const node = `n${k % streamCount}`;
    const seenAt = new Date(Date.UTC(2024, 0, 1) + k * 1000).toISOString();
    return { id: aliveSeenId(node, seenAt), type: 'AliveSeen', data: { node, seenAt } } satisfies AliveSeen & { id: string };
  });
}
const chunk = <T>(xs: readonly T[], n: number): T[][] =>
  Array.from({ length: Math.ceil(xs.length / n) }, (_, i) => xs.slice(i * n, i * n + n));
const streamOf = (e: NewEvent<NodeEvent>): string => `node-${e.data.node}`;
const metadata = '{"v":2}';

type Side = Readonly<{ append: (batch: readonly NewEvent<NodeEvent>[]) => Promise<unknown>; close: () => Promise<void>; url: string }>;

/**
 * Baseline: the least a hand-written loop must do on the adapter's own table (same columns,
 * indexes and NOTIFY trigger) — stringify, one multi-row INSERT per batch through unnest arrays, a
 * named prepared statement, autocommit. It knows every position and revision for free and checks
 * nothing: no expected revision, no idempotency, no ordering guarantee for readers.
 */
async function rawSide(): Promise<Side> {
  const { schema, url } = await freshConverge();
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  const text = `INSERT INTO ${schema}.events (position, id, stream, revision, type, data, metadata)
    SELECT * FROM unnest($1::int8[], $2::uuid[], $3::text[], $4::int8[], $5::text[], $6::json[], $7::json[])`;
  const revisions = new Map<string, number>();
  let position = 0;
  return {
    url,
    append: (b) => {
      const cols: unknown[][] = [[], [], [], [], [], [], []];
      for (const e of b) {
        const s = streamOf(e);
        const r = (revisions.get(s) ?? -1) + 1;
        revisions.set(s, r);
        const row = [String(++position), e.id, s, String(r), e.type, JSON.stringify(e.data), metadata];
        row.forEach((v, i) => cols[i]!.push(v));
      }
      return client.query({ name: 'raw_insert', text, values: cols });
    },
    close: () => client.end(),
  };
}

async function convergeSide(): Promise<Side> {
  const { url } = await freshConverge();
  const store = createPostgresEventStore(url);
  await store.headPosition();
  return {
    url,
    append: (b) => store.append(b.map((e): StreamWrite => ({ stream: streamOf(e), expected: 'any', events: [e] }))),
    close: () => store.close(),
  };
}

/**
 * Emmett appends to one stream per call (no many-stream transaction), so a batch is one
 * appendToStream per stream, issued together on its pool: its best case, not atomic across streams.
 */
async function emmettSide(): Promise<Side> {
  const url = await freshDatabase();
  const store = getPostgreSQLEventStore(url);
  await store.schema.migrate();
  return {
    url,
    append: (b) => Promise.all(b.map((e) => store.appendToStream(streamOf(e), [{ type: e.type, data: e.data }]))),
    close: () => store.close(),
  };
}

/**
 * The three sides append the same batches in turn, batch by batch, rotating who goes first, each
 * call timed on its own: on a machine whose load moves by the second, whole passes one after the
 * other measured the load more than the stores (a probe of 400 single appends interleaved this way
 * gave 0.85–1.07 where back-to-back passes gave 0.56).
 */
async function appendPass(batches: readonly NewEvent<NodeEvent>[][]): Promise<{ ms: number[]; urls: string[] }> {
  const sides = [await rawSide(), await convergeSide(), await emmettSide()];
  const ms = [0, 0, 0];
  for (let i = 0; i < batches.length; i++) {
    for (let k = 0; k < 3; k++) {
      const j = (i + k) % 3;
      const t = performance.now();
      await sides[j]!.append(batches[i]!);
      ms[j]! += performance.now() - t;
    }
  }
  for (const side of sides) await side.close();
  return { ms, urls: sides.map((x) => x.url) };
}

async function convergeReadAll(url: string): Promise<number> {
  const store = createPostgresEventStore(url);
  let count = 0;
  for await (const batch of store.readAll()) count += batch.length;
  await store.close();
  return count;
}

/** Baseline read: pages of 1,000 rows in position order, data parsed. */
async function rawReadAll(url: string): Promise<number> {
  const schema = new URL(url).searchParams.get('schema')!;
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  let after = '0';
  let count = 0;
  for (;;) {
    const r = await client.query<{ position: string; data: unknown }>({
      name: 'raw_read',
      text: `SELECT position, id, stream, revision, type, data, metadata FROM ${schema}.events WHERE position > $1 ORDER BY position LIMIT 1000`,
      values: [after],
    });
    if (r.rows.length === 0) break;
    for (const row of r.rows) if (row.data !== null) count++;
    after = r.rows[r.rows.length - 1]!.position;
  }
  await client.end();
  return count;
}

/**
 * Emmett's own batch reader, paged as its consumers page it (after the last global position).
 * Counts distinct events; repeats are tallied for a note.
 */
async function emmettReadAll(url: string): Promise<number> {
  const pool = dumbo({ connectionString: url });
  let after = 0n;
  const seen = new Set<bigint>();
  for (;;) {
    const { messages } = await readMessagesBatch(pool.execute, { after, batchSize: 1000 });
    if (messages.length === 0) break;
    for (const m of messages) {
      if (seen.has(m.metadata.globalPosition)) emmettRepeats++;
      seen.add(m.metadata.globalPosition);
    }
    after = messages[messages.length - 1]!.metadata.globalPosition;
  }
  await pool.close();
  return seen.size;
}
let emmettRepeats = 0;

const report = createBenchReport(
  `Event store (PostgreSQL, ${settings}), ${streamCount.toLocaleString('en-US')} streams`,
  "Converge's PostgreSQL adapter against a raw `pg` loop on the adapter's own table (one unnest INSERT per batch, " +
    'positions and revisions known in advance, nothing checked) and against Emmett 0.42 (`@event-driven-io/emmett-postgresql`), ' +
    'on the same server and events. Every append call is one committed transaction on every side.',
);
const rate = (events: number, ms: number): number => (events / ms) * 1000;
const timed = async <T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> => {
  const t = performance.now();
  const value = await fn();
  return { ms: performance.now() - t, value };
};

async function measure(): Promise<void> {
  let offset = 0;
  let readUrls = { converge: '', emmett: '' };
  for (const [batchSize, total] of [
    [1, Math.round(2_000 * scale)],
    [100, Math.round(30_000 * scale)],
  ] as const) {
    const events = makeEvents(total, offset);
    offset += total;
    const batches = chunk(events, batchSize);
    // Two passes, each interleaved batch by batch (appendPass): best of two.
    const raw: number[] = [];
    const mine: number[] = [];
    const emmett: number[] = [];
    for (let pass = 0; pass < 2; pass++) {
      const p = await appendPass(batches);
      raw.push(rate(total, p.ms[0]!));
      mine.push(rate(total, p.ms[1]!));
      emmett.push(rate(total, p.ms[2]!));
      readUrls = { converge: p.urls[1]!, emmett: p.urls[2]! };
    }
    const name = `append, batches of ${batchSize} (${total.toLocaleString('en-US')} events)`;
    report.row({ name: `${name} vs raw pg`, unit: 'events/s', converge: mine, baseline: raw, goal: { ratioAtLeast: 0.8 } });
    report.row({
      name: `${name} vs Emmett`,
      unit: 'events/s',
      converge: mine,
      baseline: emmett,
      goal: { ratioAtLeast: 1 },
      notes: batchSize === 1 ? '' : 'Emmett: one appendToStream per stream, issued together (not atomic across streams)',
    });
  }

  // Read everything back from the last batch-of-100 stores: three alternating passes, best of three.
  const reads = { raw: [] as number[], mine: [] as number[], emmett: [] as number[] };
  const emmettMissed: number[] = [];
  let count = 0;
  for (let i = 0; i < 3; i++) {
    const r = await timed(() => rawReadAll(readUrls.converge));
    const c = await timed(() => convergeReadAll(readUrls.converge));
    const e = await timed(() => emmettReadAll(readUrls.emmett));
    if (c.value !== r.value) throw new Error(`read-all counts differ: Converge ${c.value}, raw ${r.value}`);
    count = c.value;
    emmettMissed.push(count - e.value);
    reads.raw.push(rate(count, r.ms));
    reads.mine.push(rate(count, c.ms));
    reads.emmett.push(rate(count, e.ms));
  }
  const readName = `read all, pages of 1,000, decoded (${count.toLocaleString('en-US')} events)`;
  report.row({ name: `${readName} vs raw pg`, unit: 'events/s', converge: reads.mine, baseline: reads.raw, goal: { ratioAtLeast: 0.7 } });
  report.row({ name: `${readName} vs Emmett`, unit: 'events/s', converge: reads.mine, baseline: reads.emmett, goal: { ratioAtLeast: 1 } });
  report.note(
    `Server settings: ${settings}; one server on this machine (loopback), shared with the rest of the team's work while measured.`,
  );
  if (emmettRepeats > 0 || emmettMissed.some((n) => n > 0)) {
    report.note(
      `Emmett's readMessagesBatch, paged after the last global position as its consumers page it, missed ${emmettMissed.join(' / ')} of the ` +
        `${count.toLocaleString('en-US')} events and handed over ${emmettRepeats} twice in the three passes: its pages are ordered by transaction id, ` +
        'then position, and its concurrent appends (above) make the two orders differ. Its rate counts the distinct events it read.',
    );
  }
  report.end();
}

try {
  await measure();
} finally {
  await cleanUp();
}
