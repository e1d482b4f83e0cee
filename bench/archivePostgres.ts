// Retention on PostgreSQL (docs/operations.md "Retention and archive"): how fast `store archive`
// moves closed history out of a PostgreSQL store, and what the move costs the appends that go on
// beside it. Each pass fills a fresh schema with old AliveSeen events, then measures an appender
// (ingest's shape: one append of 20 events across 20 streams at a time) alone and while the move
// runs, in alternating order from pass to pass. The move runs in the appender's process, as serve
// --retain runs in the engine's, in segments of 10,000 events (serve's size) without serve's pause.
// Run: npm run bench -- archivePostgres   (CONVERGE_BENCH_SCALE=0.3 for a quick look;
//      CONVERGE_BENCH_POSTGRES_URL, default postgres://postgres@127.0.0.1:5432/test)
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import pg from 'pg';
import { aliveSeenId } from '../src/core/events/index.ts';
import type { EventStore, StreamWrite } from '../src/store/index.ts';
import { createPostgresEventStore } from '../src/store/postgres/index.ts';
import { archivePostgresStore } from '../src/store/postgres/postgresArchive.ts';
import { createBenchReport } from './support/report.ts';

const scale = Number(process.env.CONVERGE_BENCH_SCALE ?? 1);
const serverUrl = process.env.CONVERGE_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const events = Math.round(100_000 * scale);
const streams = 1_000;
const passes = 3;
const quietMs = 4_000;
const tag = randomBytes(3).toString('hex');
const dir = mkdtempSync(join(tmpdir(), 'converge-bench-pgarchive-'));
const admin = new pg.Client({ connectionString: serverUrl });
await admin.connect();
const schemas: string[] = [];
const load = [loadavg()[0]!];

const alive = (node: string, at: number) => {
  const seenAt = new Date(at).toISOString();
  return { id: aliveSeenId(node, seenAt), type: 'AliveSeen' as const, data: { node, seenAt } };
};

/** A fresh schema holding `events` AliveSeen a year old, round-robin over `streams` node streams. */
async function filled(): Promise<{ url: string; head: bigint }> {
  const schema = `bench_pgarchive_${tag}_${schemas.length}`;
  schemas.push(schema);
  const u = new URL(serverUrl);
  u.searchParams.set('schema', schema);
  const store = createPostgresEventStore(u.toString());
  const t0 = Date.now() - 365 * 86_400_000;
  for (let k = 0; k < events; k += 1_000) {
    const byStream = new Map<string, ReturnType<typeof alive>[]>();
    for (let i = k; i < Math.min(events, k + 1_000); i++) {
      const node = `n${i % streams}`;
      byStream.set(node, [...(byStream.get(node) ?? []), alive(node, t0 + i * 1_000)]);
    }
    await store.append([...byStream].map(([node, es]): StreamWrite => ({ stream: `node-${node}`, expected: 'any', events: es })));
  }
  const head = (await store.headPosition())!;
  await store.close();
  return { url: u.toString(), head };
}

/** Appends of 20 events across 20 live streams until `until` resolves; the latency of each (ms). */
async function appendUntil(store: EventStore, until: Promise<unknown>): Promise<number[]> {
  let done = false;
  void until.finally(() => (done = true));
  const ms: number[] = [];
  let k = 0;
  while (!done) {
    const writes: StreamWrite[] = Array.from({ length: 20 }, (_, i) => {
      const node = `live${i}`;
      return { stream: `node-${node}`, expected: 'any', events: [alive(node, Date.now() + k++)] };
    });
    const s = performance.now();
    await store.append(writes);
    ms.push(performance.now() - s);
  }
  return ms;
}

const quantile = (xs: readonly number[], q: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};

const moved: number[] = [];
const p99Move: number[] = [];
const p99Quiet: number[] = [];
const p50Move: number[] = [];
const p50Quiet: number[] = [];
const maxMove: number[] = [];
const maxQuiet: number[] = [];
const loopMove: number[] = [];
let segments = 0;
try {
  for (let pass = 0; pass < passes; pass++) {
    const { url, head } = await filled();
    const store = createPostgresEventStore(url);
    await store.headPosition();
    const quiet = async (): Promise<void> => {
      const ms = await appendUntil(store, new Promise((r) => setTimeout(r, quietMs)));
      p99Quiet.push(quantile(ms, 0.99));
      p50Quiet.push(quantile(ms, 0.5));
      maxQuiet.push(Math.max(...ms));
    };
    const move = async (): Promise<void> => {
      const t = performance.now();
      const run = archivePostgresStore(url, {
        dir: join(dir, `pass${pass}`),
        before: new Date(Date.now() - 30 * 86_400_000).toISOString(),
        belowPosition: head + 1n,
        segmentEvents: 10_000,
      });
      const delay = monitorEventLoopDelay({ resolution: 10 });
      delay.enable();
      const ms = await appendUntil(store, run);
      const r = await run;
      delay.disable();
      loopMove.push(delay.max / 1e6);
      moved.push(r.events / ((performance.now() - t) / 1000));
      segments = r.segments.length;
      p99Move.push(quantile(ms, 0.99));
      p50Move.push(quantile(ms, 0.5));
      maxMove.push(Math.max(...ms));
    };
    // Alternate which side goes first, so neither always meets the warmer (or busier) server.
    if (pass % 2 === 0) {
      await quiet();
      await move();
    } else {
      await move();
      await quiet();
    }
    await store.close();
    load.push(loadavg()[0]!);
  }
} finally {
  for (const s of schemas) await admin.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`);
  await admin.end();
  rmSync(dir, { recursive: true, force: true });
}

const report = createBenchReport(
  'Archive: PostgreSQL store archive beside appends',
  `${events.toLocaleString('en-US')} AliveSeen a year old over ${streams.toLocaleString('en-US')} node streams moved by archivePostgresStore (segments of 10,000, serve's size, without serve's pause between them), while an appender in the same process appends 20 events across 20 streams per call; the baseline is the same appender with no move, measured in the same pass, order alternating.`,
);
report.row({ name: 'events moved per second', unit: 'events/s', converge: moved, notes: `${segments} segments per pass` });
report.row({ name: 'append p99 during the move, against without', unit: 'ms', better: 'lower', converge: p99Move, baseline: p99Quiet });
report.row({ name: 'append p50 during the move, against without', unit: 'ms', better: 'lower', converge: p50Move, baseline: p50Quiet });
report.row({ name: 'slowest append during the move, against without', unit: 'ms', better: 'lower', converge: maxMove, baseline: maxQuiet });
report.row({ name: 'longest event-loop stall during the move', unit: 'ms', better: 'lower', converge: loopMove });
report.note(`Load average (1 min) at the start and after each pass: ${load.map((l) => l.toFixed(2)).join(', ')}.`);
report.end();
