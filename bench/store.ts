// Store benchmark (docs/design.md §5): the SQLite adapter against a minimal hand-written
// better-sqlite3 loop on the same schema, same pragmas (WAL, synchronous=FULL) and same events,
// measured in the same run. Targets: appends ≥ 0.8 of baseline, full replay ≥ 0.7. Each append size
// is also measured through the adapter with its audit tree turned off (auditTree: false), alternating
// with the adapter as it ships: the tree's cost (docs/audit.md#what-the-tree-costs-an-append), goal ≥ 0.95.
// Run: npm run bench -- store   (CONVERGE_BENCH_SCALE=0.2 for a quick look; it runs
// bench/storePostgres.ts too, the PostgreSQL rows)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { aliveSeenId } from '../src/core/events/index.ts';
import type { AliveSeen, NodeEvent } from '../src/core/events/index.ts';
import { createSqliteEventStore } from '../src/store/sqlite/sqliteEventStore.ts';
import type { NewEvent, StreamWrite } from '../src/store/index.ts';
import { createBenchReport } from './support/report.ts';

const scale = Number(process.env.CONVERGE_BENCH_SCALE ?? 1);
const streamCount = 10_000;
const dir = mkdtempSync(join(tmpdir(), 'converge-bench-store-'));
let files = 0;
const freshPath = (): string => join(dir, `b${files++}.db`);

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

/** A file with the adapter's schema, opened raw with the same pragmas the adapter uses. */
async function rawDatabase(): Promise<Database.Database> {
  const path = freshPath();
  await createSqliteEventStore(path).close();
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  return db;
}

/** Baseline: the least a hand-written loop must do — stringify, insert, one transaction per batch. */
async function baselineAppend(batches: readonly NewEvent<NodeEvent>[][]): Promise<number> {
  const db = await rawDatabase();
  const insert = db.prepare('INSERT INTO events (id, stream, revision, type, data, metadata) VALUES (?, ?, ?, ?, ?, ?)');
  const revisions = new Map<string, number>(); // the baseline knows every revision for free
  const tx = db.transaction((batch: readonly NewEvent<NodeEvent>[]) => {
    for (const e of batch) {
      const s = streamOf(e);
      const r = (revisions.get(s) ?? -1) + 1;
      revisions.set(s, r);
      insert.run(e.id, s, r, e.type, JSON.stringify(e.data), '{"v":1}');
    }
  });
  const t = performance.now();
  for (const b of batches) tx.immediate(b);
  const ms = performance.now() - t;
  db.close();
  return ms;
}

async function adapterAppend(batches: readonly NewEvent<NodeEvent>[][], auditTree = true): Promise<{ ms: number; path: string }> {
  const path = freshPath();
  const store = createSqliteEventStore(path, { auditTree });
  const writes: StreamWrite[][] = batches.map((b) => b.map((e) => ({ stream: streamOf(e), expected: 'any', events: [e] })));
  const t = performance.now();
  for (const w of writes) await store.append(w);
  const ms = performance.now() - t;
  await store.close();
  return { ms, path };
}

/** Baseline replay: select every row in position order and parse its data. */
function baselineReplay(path: string): { ms: number; count: number } {
  const db = new Database(path, { readonly: true });
  const t = performance.now();
  let count = 0;
  for (const row of db
    .prepare('SELECT position, id, stream, revision, type, data, metadata FROM events ORDER BY position')
    .iterate() as Iterable<{ data: string }>) {
    if (JSON.parse(row.data) !== null) count++;
  }
  const ms = performance.now() - t;
  db.close();
  return { ms, count };
}

async function adapterReplay(path: string): Promise<{ ms: number; count: number }> {
  const store = createSqliteEventStore(path);
  const t = performance.now();
  let count = 0;
  for await (const batch of store.readAll()) count += batch.length;
  const ms = performance.now() - t;
  await store.close();
  return { ms, count };
}

const report = createBenchReport(
  `Event store (SQLite, WAL, synchronous=FULL), ${streamCount.toLocaleString('en-US')} streams`,
  'The SQLite adapter against a minimal hand-written better-sqlite3 loop on the same schema, pragmas and events ' +
    '(appends: stringify, insert, one transaction per batch; replay: select every row in position order and parse it).',
);
const rate = (events: number, ms: number): number => (events / ms) * 1000;

let offset = 0;
let replayPath = '';
for (const [batchSize, total] of [
  [1, Math.round(400 * scale)],
  [100, Math.round(100_000 * scale)],
  [1000, Math.round(300_000 * scale)],
] as const) {
  const events = makeEvents(total, offset);
  offset += total;
  const batches = chunk(events, batchSize);
  // Two alternating passes each, best of two: neither side always gets the warmer machine.
  const base: number[] = [];
  const mine: number[] = [];
  const withoutTree: number[] = [];
  for (let pass = 0; pass < 2; pass++) {
    base.push(rate(total, await baselineAppend(batches)));
    withoutTree.push(rate(total, (await adapterAppend(batches, false)).ms));
    const a = await adapterAppend(batches);
    mine.push(rate(total, a.ms));
    replayPath = a.path;
  }
  report.row({
    name: `append, batches of ${batchSize} (${total.toLocaleString('en-US')} events)`,
    unit: 'events/s',
    converge: mine,
    baseline: base,
    goal: { ratioAtLeast: 0.8 },
  });
  report.row({
    name: `append with the audit tree against without, batches of ${batchSize}`,
    unit: 'events/s',
    converge: mine,
    baseline: withoutTree,
    goal: { ratioAtLeast: 0.95 },
    notes: 'baseline: the same adapter with auditTree: false (no leaf hashes, no head), in the same alternation',
  });
}

// Full replay of the largest store: three alternating passes each, best of three.
const base: number[] = [];
const mine: number[] = [];
let count = 0;
for (let i = 0; i < 3; i++) {
  const b = baselineReplay(replayPath);
  const a = await adapterReplay(replayPath);
  if (a.count !== b.count) throw new Error(`replay read ${a.count} events, baseline ${b.count}`);
  count = a.count;
  base.push(rate(b.count, b.ms));
  mine.push(rate(a.count, a.ms));
}
report.row({
  name: `full replay, readAll (${count.toLocaleString('en-US')} events)`,
  unit: 'events/s',
  converge: mine,
  baseline: base,
  goal: { ratioAtLeast: 0.7 },
});
report.end();
rmSync(dir, { recursive: true, force: true });
