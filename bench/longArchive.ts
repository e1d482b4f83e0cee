// `state --at` a year back over a long archive (docs/operations.md "Retention and archive"): a
// fleet's year written through the engine's own code (the event constructors, the SQLite store's
// append), moved to segments as `converge store archive` moves it, then one node's state eleven
// months back read through the archive, the segments' time ranges used (docs/store.md "Segment
// time ranges": the segments past the moment left unopened) and not (the stream filters alone, as
// for segments archived before there were ranges). Each pass opens the store and the archive
// afresh (what one CLI run pays: the first read), then reads a second node through the same view
// (the API's case: block tables already read). Passes alternate the two.
//   npm run bench -- longArchive   BENCH_LONG_SEGMENTS (400 × scale), BENCH_LONG_SEGMENT_EVENTS (2,000),
//                                  BENCH_LONG_NODES (20,000 × scale), BENCH_LONG_PASSES (5)
//   BENCH_LONG_FULL_YEAR=1         14,000 segments of 60 events over 500 nodes: the segment count of a full
//                                  year of 20,000 nodes at 100,000 events a segment, and a node in several
//                                  hundred of them, with each segment cut to what can be written here in minutes
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { generateSigningKey } from '../src/core/declaration/index.ts';
import { makeDeclarationSent, makeNodeHeard, makeNodeSilent, makeReportReceived, streamOf } from '../src/core/events/index.ts';
import type { WithId, ConvergeEvent } from '../src/core/events/index.ts';
import { encodeReport } from '../src/core/wire/index.ts';
import { stateAsOf } from '../src/readModel/queries.ts';
import { withArchive } from '../src/store/archive/withArchive.ts';
import type { EventStore, StreamWrite } from '../src/store/index.ts';
import { archiveSqliteStore } from '../src/store/sqlite/sqliteArchive.ts';
import { createSqliteEventStore } from '../src/store/sqlite/sqliteEventStore.ts';
import { createBenchReport } from './support/report.ts';

const scale = Number(process.env['CONVERGE_BENCH_SCALE'] ?? 1);
const fullYear = process.env['BENCH_LONG_FULL_YEAR'] === '1';
const segments = Math.max(20, Math.round(Number(process.env['BENCH_LONG_SEGMENTS'] ?? (fullYear ? 14_000 : 400 * scale))));
const segmentEvents = Number(process.env['BENCH_LONG_SEGMENT_EVENTS'] ?? (fullYear ? 60 : 2_000));
const nodeCount = Math.max(100, Math.round(Number(process.env['BENCH_LONG_NODES'] ?? (fullYear ? 500 : 20_000 * scale))));
const passes = Number(process.env['BENCH_LONG_PASSES'] ?? 5);
const dayMs = 86_400_000;
const day0 = Date.parse('2025-12-01T00:00:00Z');
const yearMs = 365 * dayMs;
const dir = mkdtempSync(join(tmpdir(), 'converge-bench-long-archive-'));
const fmt = (n: number, digits = 0): string => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const nodes = Array.from({ length: nodeCount }, (_, i) => `n${String(i).padStart(6, '0')}`);

/** A small seeded PRNG: the same year every run. */
function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * The year: `segments × segmentEvents` events (and each node's last few, which stay hot), evenly
 * over 365 days, each for a node drawn at random. A node's events go by turns: a declaration, its
 * report, then outages (NodeSilent, NodeHeard) until its next declaration.
 */
async function writeYear(path: string): Promise<number> {
  const store = createSqliteEventStore(path, { synchronous: 'NORMAL' });
  const key = generateSigningKey();
  const rand = prng(7);
  const turn = new Int32Array(nodeCount);
  const serial = new Int32Array(nodeCount);
  const digest: string[] = [];
  const total = segments * segmentEvents + 3 * nodeCount;
  const step = yearMs / total;
  try {
    for (let first = 0; first < total; first += 1_000) {
      const byStream = new Map<string, WithId<ConvergeEvent>[]>();
      for (let k = first; k < Math.min(total, first + 1_000); k++) {
        const i = Math.floor(rand() * nodeCount);
        const node = nodes[i]!;
        const t = day0 + Math.floor(k * step);
        const n = turn[i]!++ % 10;
        let e: WithId<ConvergeEvent>;
        if (n === 0) {
          e = makeDeclarationSent({
            node,
            serial: ++serial[i]!,
            resources: [{ id: 'web', image: `r/web:${serial[i]}` }],
            key,
            now: new Date(t),
          });
          digest[i] = e.data.digest;
        } else if (n === 1) {
          const report = { node, applied: ['web'], failed: {}, refused: '', carried: [8080], declared: digest[i]! };
          e = makeReportReceived(report, encodeReport(report), { messageId: `r-${k}`, redelivered: false, userId: node }, t);
        } else if (n % 2 === 0) e = makeNodeSilent(node, t - 61_000, t, 60_000);
        else e = makeNodeHeard(node, t, t - 120_000);
        const s = streamOf(node);
        byStream.set(s, [...(byStream.get(s) ?? []), e]);
      }
      const writes: StreamWrite[] = [...byStream].map(([stream, events]) => ({ stream, expected: 'any', events }));
      await store.append(writes);
    }
    return Number((await store.headPosition())!);
  } finally {
    await store.close();
  }
}

/** The same store with no time range in its manifest: every segment its filter allows is opened, as before ranges were kept. */
function untimed(store: EventStore): EventStore {
  const manifest = store.archiveManifest!.bind(store);
  store.archiveManifest = async () => {
    const m = await manifest();
    return { ...m, segments: m.segments.map(({ minTime: _min, maxTime: _max, ...s }) => s) };
  };
  return store;
}

type Pass = { firstMs: number; secondMs: number; opened: number; secondOpened: number; events: number; answer: string };

/** One CLI-like run: open the store and its archive, state --at for `a`, then for `b` through the same view. */
async function pass(path: string, archive: string, timed: boolean, a: string, b: string, at: number): Promise<Pass> {
  let opened = 0;
  const t0 = performance.now();
  const plain = createSqliteEventStore(path);
  const store = await withArchive(timed ? plain : untimed(plain), archive, { onOpen: () => opened++ });
  try {
    const asOf = { kind: 'time', time: at, iso: new Date(at).toISOString() } as const;
    const r = await stateAsOf(store, a, asOf);
    const firstMs = performance.now() - t0;
    const first = opened;
    const t1 = performance.now();
    const r2 = await stateAsOf(store, b, asOf);
    const secondMs = performance.now() - t1;
    const answer = JSON.stringify([r, r2], (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v));
    return { firstMs, secondMs, opened: first, secondOpened: opened - first, events: r.folded, answer };
  } finally {
    await store.close();
  }
}

try {
  const path = join(dir, 'year.db');
  const archive = join(dir, 'archive');
  const t0 = performance.now();
  const head = await writeYear(path);
  const writeS = (performance.now() - t0) / 1000;
  const t1 = performance.now();
  const moved = await archiveSqliteStore(path, {
    dir: archive,
    before: new Date(day0 + yearMs).toISOString(),
    belowPosition: BigInt(head) + 1n,
    segmentEvents,
  });
  const archiveS = (performance.now() - t1) / 1000;
  const du = spawnSync('du', ['-sk', archive], { encoding: 'utf8' }).stdout.split('\t')[0];

  // Eleven months back from the year's end.
  const at = day0 + yearMs - 335 * dayMs;
  const load: number[] = [];
  const runs = { before: [] as Pass[], after: [] as Pass[] };
  for (let p = 0; p < passes; p++) {
    // Other nodes each pass: no read is helped by the one before it but through the OS's page cache.
    const a = nodes[(p * 2 + 1) % nodeCount]!;
    const b = nodes[(p * 2 + 2) % nodeCount]!;
    load.push(loadavg()[0]!);
    for (const timed of p % 2 === 0 ? [false, true] : [true, false])
      runs[timed ? 'after' : 'before'].push(await pass(path, archive, timed, a, b, at));
    // The time ranges change what is opened, never the answer.
    if (runs.after[p]!.answer !== runs.before[p]!.answer)
      throw new Error(`${a}, ${b}: the answers differ with the time ranges and without`);
  }

  const report = createBenchReport(
    'History that lasts: state --at a year back over a long archive',
    `${fmt(moved.segments.length)} archive segments of ${fmt(segmentEvents)} events (a year of ${fmt(nodeCount)} nodes written through the ` +
      "engine's own code, moved as `converge store archive` moves it); one node's state eleven months back read through the archive, " +
      "with the segments' time ranges and stream filters against the filters alone (every segment that may hold the node opened, " +
      'as for segments archived before ranges were kept).',
  );
  const pick = (rs: Pass[], f: (r: Pass) => number): number[] => rs.map(f);
  report.row({
    name: 'state --at 11 months back, first read (store and archive opened afresh), time ranges + filters against filters',
    unit: 'ms',
    better: 'lower',
    converge: pick(runs.after, (r) => r.firstMs),
    baseline: pick(runs.before, (r) => r.firstMs),
    goal: { atMost: 1000 },
    notes:
      `segments opened: ${fmt(runs.after[0]!.opened)} with time ranges, ${fmt(runs.before[0]!.opened)} with filters alone; ` +
      `${fmt(runs.after[0]!.events)} of the node's events folded`,
  });
  report.row({
    name: 'state --at 11 months back, second read (another node, same view), time ranges + filters against filters',
    unit: 'ms',
    better: 'lower',
    converge: pick(runs.after, (r) => r.secondMs),
    baseline: pick(runs.before, (r) => r.secondMs),
    goal: { atMost: 1000 },
    notes: `segments newly opened: ${fmt(runs.after[0]!.secondOpened)} with time ranges, ${fmt(runs.before[0]!.secondOpened)} with filters alone`,
  });
  report.note(
    `Year: ${fmt(head)} events written in ${fmt(writeS, 1)} s; ${fmt(moved.events)} moved into ${fmt(moved.segments.length)} segments ` +
      `(${fmt(moved.bytes / 1e6, 1)} MB, du ${du} KiB) in ${fmt(archiveS, 1)} s. Each node is in about ` +
      `${fmt((segments * segmentEvents) / nodeCount, 0)} events of the archive, in fewer segments (a call appends a node's events of ` +
      'its 1,000 side by side); eleven months back, a read needs only those of the first month. ' +
      `Load average (1 min) at each pass: ${load.map((l) => fmt(l, 2)).join(', ')}. "First read" is cold in the process (no block table read yet), ` +
      "not in the OS's page cache (the files were just written).",
  );
  report.end();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
