// A fleet's history over simulated days, written through the engine's own code (the event
// constructors, the liveness recorder, the SQLite store's append; no broker), then extrapolated to
// 100,000 nodes × 365 days (docs/design.md §2–3: liveness recorded as transitions). Per node per
// day: one declaration, its report, and a few outages (each a NodeSilent when the grace elapses and
// a NodeHeard when the node is back); plus one bad day on which 30 % of the nodes flap every few
// minutes. Bytes on disk per event type are SQLite's own page accounting: the pages in use
// (page_count − freelist_count) before and after each append, every append holding one type.
// Beside it, the rule stores were written with before: one AliveSeen per node per 15 s, measured
// on a store of its own. Also: steady-state appends/s, warm start after day 1 and at the end (and,
// with BENCH_HISTORY_DAYS ≥ 32, after the day each node's bounded state is full), and `state --at`
// a moment on day 1.
//   npm run bench -- history     CONVERGE_BENCH_SCALE=0.01 (100 nodes) for a quick look; BENCH_HISTORY_NODES (default
//                                10,000 × scale), BENCH_HISTORY_DAYS (7), BENCH_HISTORY_OUTAGES (per node per day, 2),
//                                BENCH_HISTORY_PASSES (warm starts per store, alternating, 5)
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import Database from 'better-sqlite3';
import { generateSigningKey } from '../src/core/declaration/index.ts';
import {
  makeAliveSeen,
  makeDeclarationSent,
  makeObservationStarted,
  makeObservationStopped,
  makeReportReceived,
} from '../src/core/events/index.ts';
import { encodeReport } from '../src/core/wire/index.ts';
import { createLivenessRecorder } from '../src/engine/liveness/recorder.ts';
import type { LivenessRecorder } from '../src/engine/liveness/recorder.ts';
import { stateAsOf } from '../src/readModel/queries.ts';
import { recentLatencyLimit, sendHistoryLimit } from '../projections/index.ts';
import type { NewEvent } from '../src/store/index.ts';
import { createSqliteEventStore } from '../src/store/sqlite/sqliteEventStore.ts';
import { openSnapshot } from '../src/readModel/snapshot/snapshotFile.ts';
import { archiveHistory } from './support/archiveHistory.ts';
import { coldStart, copyStore, meteredStore, warmCpu, warmStart } from './support/historyStores.ts';
import type { Metered } from './support/historyStores.ts';
import { createBenchReport } from './support/report.ts';

const scale = Number(process.env['CONVERGE_BENCH_SCALE'] ?? 1);
const nodeCount = Math.max(10, Math.round(Number(process.env['BENCH_HISTORY_NODES'] ?? 10_000 * scale)));
const days = Math.max(1, Number(process.env['BENCH_HISTORY_DAYS'] ?? 7));
const outagesPerDay = Number(process.env['BENCH_HISTORY_OUTAGES'] ?? 2);
/** Warm starts per store, after day 1 and at the end, alternating. */
const startPasses = Math.max(1, Number(process.env['BENCH_HISTORY_PASSES'] ?? 5));
/**
 * The day after which every node's state in the read model, and so the snapshot, has its full size:
 * it keeps the last sends and report latencies up to these limits, one of each a day here. A warm
 * start grows until then and must not after; it is compared at the end against this day when the
 * history is at least twice as long.
 */
const fullDay = Math.max(sendHistoryLimit, recentLatencyLimit);
const fullCompared = days + 1 >= 2 * fullDay;
const flapShare = 0.3;
/** A flapping node is down 2 minutes of every 5 on the bad day. */
const flapPeriodMin = 5;
const graceMs = 60_000;
const target = { nodes: 100_000, days: 365 };
const dayMs = 86_400_000;
const day0 = Date.parse('2026-01-01T00:00:00Z');
const dir = mkdtempSync(join(tmpdir(), 'converge-bench-history-'));
const fmt = (n: number, digits = 0): string => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const nodes = Array.from({ length: nodeCount }, (_, i) => `node-${String(i).padStart(6, '0')}`);

/** A small seeded PRNG: the same history every run. */
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

const key = generateSigningKey();
const specs = Array.from({ length: 10 }, (_, i) => [{ id: 'web', image: `registry.example/web:1.${i}`, ports: [8080] }, { id: 'db' }]);

/**
 * One simulated day, minute by minute: every node up is heard each minute (the recorder makes a
 * NodeHeard only for a node not held heard), then the sweep records NodeSilent for those not heard
 * for the grace, as the engine's observer does. Declarations go out at 09:00, reports come at 09:01.
 */
async function simulateDay(m: Metered, rec: LivenessRecorder, d: number, bad: boolean): Promise<void> {
  const start = day0 + d * dayMs;
  const rand = prng(d + 1);
  // Outages: `outagesPerDay` a node, 2–20 minutes each, starting at a random minute.
  const starts: number[][] = Array.from({ length: 1440 }, () => []);
  for (let i = 0; i < nodeCount; i++)
    for (let k = 0; k < outagesPerDay; k++) starts[Math.floor(rand() * 1430)]!.push(i * 32 + 2 + Math.floor(rand() * 19));
  const downUntil = new Int32Array(nodeCount).fill(-1);
  const flapping = bad ? Math.round(nodeCount * flapShare) : 0;
  const digests: string[] = [];
  for (let minute = 0; minute < 1440; minute++) {
    const t = start + minute * 60_000;
    for (const packed of starts[minute]!) {
      const i = packed >> 5;
      downUntil[i] = Math.max(downUntil[i]!, minute + (packed & 31));
    }
    const heard: NewEvent[] = [];
    for (let i = 0; i < nodeCount; i++) {
      if (downUntil[i]! > minute) continue;
      if (i < flapping && (minute + i) % flapPeriodMin < 2) continue;
      const at = t + (i % 1_000);
      const e = rec.heard(nodes[i]!, at, at);
      if (e !== null) heard.push(e);
    }
    await m.append(heard);
    await m.append(rec.silences(t + 30_000, t + 30_000));
    if (minute === 540) {
      const sends = nodes.map((node, i) => {
        const e = makeDeclarationSent({ node, serial: d + 1, resources: specs[(i + d) % specs.length]!, key, now: new Date(t + i) });
        digests[i] = e.data.digest;
        return e;
      });
      await m.append(sends);
    }
    if (minute === 541) {
      await m.append(
        nodes.map((node, i) => {
          const report = { node, applied: ['web', 'db'], failed: {}, refused: '', carried: [8080], declared: digests[i]! };
          return makeReportReceived(report, encodeReport(report), { messageId: `r-${d}-${i}`, redelivered: false, userId: node }, t + i);
        }),
      );
    }
  }
}

/** The old rule on a store of its own: every node's AliveSeen every 15 s for `minutes`, in time order. */
async function oldRuleBytesPerAlive(minutes: number): Promise<number> {
  const m = meteredStore(join(dir, 'alive-seen.db'));
  for (let tick = 0; tick < minutes * 4; tick++) {
    const t = day0 + tick * 15_000;
    await m.append(nodes.map((node, i) => makeAliveSeen({ node }, t + (i % 1_000))));
  }
  const perEvent = m.bytes.get('AliveSeen')! / m.counts.get('AliveSeen')!;
  await m.close();
  return perEvent;
}

try {
  const path = join(dir, 'history.db');
  const m = meteredStore(path);
  const rec = createLivenessRecorder({ graceMs });
  const t0 = performance.now();
  await m.append([makeObservationStarted('bench', day0, graceMs, null)]);
  const perDay: Map<string, number>[] = [];
  /** CPU seconds (every thread of this process) to record each day: the recorder and the appends. */
  const cpuPerDay: number[] = [];
  const day1Path = join(dir, 'history-day1.db');
  const fullPath = join(dir, 'history-full.db');
  let day1ColdS = 0;
  let fullColdS = 0;
  for (let d = 0; d <= days; d++) {
    const cpu0 = process.cpuUsage();
    await simulateDay(m, rec, d, d === days);
    const cpu = process.cpuUsage(cpu0);
    cpuPerDay.push((cpu.user + cpu.system) / 1e6);
    perDay.push(m.takeDay());
    // A store kept as it stood after day 1 (and after the full day), with a snapshot of its own.
    if (d === 0 || (fullCompared && d === fullDay - 1)) {
      await m.store().close();
      const coldS = await coldStart(path);
      copyStore(path, d === 0 ? day1Path : fullPath);
      if (d === 0) day1ColdS = coldS;
      else fullColdS = coldS;
      await m.reopen();
    }
  }
  await m.append([makeObservationStopped('bench', day0 + (days + 1) * dayMs, 'stopped')]);
  const writeS = (performance.now() - t0) / 1000;
  const totalBytes = m.used();
  const { bytes, counts } = m;
  await m.close();

  const db = new Database(path, { readonly: true });
  const tables = db.prepare('SELECT name, sum(pgsize) AS bytes FROM dbstat GROUP BY name ORDER BY bytes DESC').all() as {
    name: string;
    bytes: number;
  }[];
  db.close();
  const endColdS = await coldStart(path);
  // Both stores started in turn, so a burst of load on the shared machine falls on both alike.
  const warm = { day1: [] as number[], full: [] as number[], end: [] as number[], load: [] as number[] };
  for (let p = 0; p < startPasses; p++) {
    warm.day1.push(await warmStart(day1Path, nodeCount));
    if (fullCompared) warm.full.push(await warmStart(fullPath, nodeCount));
    warm.end.push(await warmStart(path, nodeCount));
    warm.load.push(loadavg()[0]!);
  }

  // state --at a moment on day 1 (noon), of flapping nodes: the longest streams, each read once.
  const store = createSqliteEventStore(path);
  const at = day0 + dayMs / 2;
  const asOf: number[] = [];
  let streamLen = 0;
  for (let i = 0; i < 5; i++) {
    const s = performance.now();
    const r = await stateAsOf(store, nodes[i]!, { kind: 'time', time: at, iso: new Date(at).toISOString() });
    asOf.push(performance.now() - s);
    streamLen = Math.max(streamLen, r.total);
  }
  await store.close();

  // The archive (docs/operations.md "Retention and archive"): all but the last 30 simulated days,
  // or the whole history when it is shorter, below the snapshot the end's starts wrote.
  const simulatedDays = days + 1;
  const archiveBefore = day0 + (simulatedDays > 30 ? simulatedDays - 30 : simulatedDays + 1) * dayMs;
  const snap = await openSnapshot(`${path}.snapshot`);
  const archived = await archiveHistory(path, join(dir, 'archive'), {
    before: new Date(archiveBefore).toISOString(),
    below: snap!.position,
    asOf: { nodes: nodes.slice(0, 5), at },
  });

  const aliveBytes = await oldRuleBytesPerAlive(Number(process.env['BENCH_HISTORY_ALIVE_MINUTES'] ?? 10));

  // The model: bytes per event by type, events per node per normal day (days 2…N; day 1 also
  // holds every node's first NodeHeard) and on the bad day, scaled linearly to the target.
  const perEvent = new Map([...bytes].map(([type, b]) => [type, b / counts.get(type)!]));
  const normalDays = perDay.slice(days > 1 ? 1 : 0, days);
  const perNodeDay = (ds: Map<string, number>[], type: string): number =>
    ds.reduce((s, d) => s + (d.get(type) ?? 0), 0) / ds.length / nodeCount;
  const types = ['DeclarationSent', 'ReportReceived', 'NodeHeard', 'NodeSilent'];
  const bytesPerNodeDay = (ds: Map<string, number>[]): number => types.reduce((s, t) => s + perNodeDay(ds, t) * perEvent.get(t)!, 0);
  const normal = bytesPerNodeDay(normalDays);
  const badDay = bytesPerNodeDay([perDay[days]!]);
  const firstHeard = perEvent.get('NodeHeard')!;
  const yearGB = (target.nodes * ((target.days - 1) * normal + badDay + firstHeard)) / 1e9;
  const sendsAndReports =
    perNodeDay(normalDays, 'DeclarationSent') * perEvent.get('DeclarationSent')! +
    perNodeDay(normalDays, 'ReportReceived') * perEvent.get('ReportReceived')!;
  const oldYearGB = (target.nodes * target.days * (sendsAndReports + (dayMs / 15_000) * aliveBytes)) / 1e9;
  const outageGB = (target.nodes * target.days * (perEvent.get('NodeHeard')! + perEvent.get('NodeSilent')!)) / 1e9;
  const transitionsPerNodeDay = perNodeDay(normalDays, 'NodeHeard') + perNodeDay(normalDays, 'NodeSilent');

  const report = createBenchReport(
    'History: a year of a 100,000-node fleet, extrapolated',
    `${fmt(nodeCount)} nodes × ${days} simulated days + one bad day (${flapShare * 100} % of the nodes down 2 minutes in every ` +
      `${flapPeriodMin}), written through the engine's own code into SQLite: per node per day a declaration, its report and ` +
      `${outagesPerDay} outages recorded as transitions (NodeSilent, NodeHeard). Bytes per event type from SQLite's page ` +
      `accounting, extrapolated linearly to ${fmt(target.nodes)} nodes × ${target.days} days (364 ordinary days and one bad one), ` +
      'against the rule stores were written with before (one AliveSeen per node per 15 s, measured on a store of its own).',
  );
  for (const t of types) {
    report.row({
      name: `bytes on disk per ${t}`,
      unit: 'B',
      better: 'lower',
      converge: perEvent.get(t)!,
      ...(t === 'NodeHeard' || t === 'NodeSilent' ? { baseline: aliveBytes } : {}),
      notes:
        `${fmt(counts.get(t)!)} written; per node per ordinary day ${fmt(perNodeDay(normalDays, t), 2)}, on the bad day ` +
        `${fmt(perNodeDay([perDay[days]!], t), 1)}${t.startsWith('Node') ? '; baseline: one AliveSeen' : ''}`,
    });
  }
  report.row({
    name: `store size, ${fmt(target.nodes)} nodes × ${target.days} days (extrapolated), against AliveSeen every 15 s`,
    unit: 'GB',
    better: 'lower',
    converge: yearGB,
    baseline: oldYearGB,
    goal: { atMost: 100 },
    notes:
      `moonshot ≤ 30 GB; ${fmt(normal, 0)} B per node per ordinary day, ${fmt(badDay, 0)} on the bad day ` +
      `(${fmt((target.nodes * badDay) / 1e9, 2)} GB for the fleet that day); each outage per node per day adds ` +
      `${fmt(outageGB, 1)} GB a year; the old rule: ${fmt((aliveBytes * (dayMs / 15_000) * 1e4) / 1e9, 1)} GB a day of AliveSeen at 10,000 nodes`,
  });
  const ordinaryCpu = cpuPerDay.slice(days > 1 ? 1 : 0, days);
  const ordinaryCpuS = ordinaryCpu.reduce((a, b) => a + b, 0) / ordinaryCpu.length;
  const badCpuS = cpuPerDay[days]!;
  report.row({
    name: 'CPU to record the bad day (liveness recorder, sweep and appends), against an ordinary day',
    unit: 's',
    better: 'lower',
    converge: badCpuS,
    baseline: ordinaryCpuS,
    notes:
      `${fmt(nodeCount)} nodes, every node up heard once a minute (the simulation's own loop included); scaled to ` +
      `${fmt(target.nodes)} nodes, the bad day takes ${fmt((badCpuS * target.nodes) / nodeCount, 0)} CPU seconds, ` +
      `${fmt((100 * badCpuS * target.nodes) / nodeCount / 86_400, 2)} % of a core over the day (an ordinary day ` +
      `${fmt((100 * ordinaryCpuS * target.nodes) / nodeCount / 86_400, 2)} %); the engine's alive path, which hears each ` +
      'node every 5 s and appends nothing while it stays heard, is measured apart (bench/alive)',
  });
  report.row({
    name: `steady-state appends at ${fmt(target.nodes)} nodes, nothing but liveness changing, against AliveSeen every 15 s`,
    unit: 'events/s',
    better: 'lower',
    converge: (target.nodes * transitionsPerNodeDay) / 86_400,
    baseline: target.nodes / 15,
    goal: { atMost: 10 },
    notes:
      `computed from the model: ${fmt(transitionsPerNodeDay, 2)} transitions per node per ordinary day (${outagesPerDay} outages, ` +
      'an assumption: BENCH_HISTORY_OUTAGES); a node that stays alive appends nothing',
  });
  report.row({
    name: `warm start (open the store, restore the snapshot) after day ${days + 1}, against after day 1`,
    unit: 's',
    better: 'lower',
    converge: warm.end,
    baseline: warm.day1,
    goal: { atMost: 2 },
    notes:
      `${fmt(nodeCount)} nodes; cold (fold from zero) ${fmt(day1ColdS, 2)} s after day 1, ${fmt(endColdS, 2)} s at the end; ` +
      `the same ratio ≈ 1 is the goal; passes alternate between the stores; load average (1 min) ${warm.load.map((l) => fmt(l, 1)).join(', ')}`,
  });
  if (fullCompared) {
    report.row({
      name: `warm start's CPU after day ${days + 1}, against after day ${fullDay} (every node's bounded state full)`,
      unit: 's',
      better: 'lower',
      converge: warmCpu.get(path)!,
      baseline: warmCpu.get(fullPath)!,
      goal: { ratioAtMost: 1.25 },
      notes:
        `${fmt(nodeCount)} nodes; the snapshot keeps each node's last ${sendHistoryLimit} sends and ${recentLatencyLimit} report latencies, ` +
        `full after day ${fullDay} here (one of each a day), so a longer history must not cost more: "the same" is the goal, 1.25 the noise allowed; ` +
        `snapshot ${fmt(statSync(`${fullPath}.snapshot`).size / 1024)} KiB after day ${fullDay}, ${fmt(statSync(`${path}.snapshot`).size / 1024)} KiB at the end, ` +
        `${fmt(statSync(day1Path + '.snapshot').size / 1024)} KiB after day 1; wall time best ${fmt(Math.min(...warm.end) * 1000, 1)} against ${fmt(Math.min(...warm.full) * 1000, 1)} ms; ` +
        `cold ${fmt(fullColdS, 2)} s after day ${fullDay}, ${fmt(endColdS, 2)} s at the end`,
    });
  }
  report.row({
    name: 'state --at day 1 noon (stateAsOf), at the end of the history',
    unit: 'ms',
    better: 'lower',
    converge: asOf,
    goal: { atMost: 1000 },
    notes:
      `longest stream ${fmt(streamLen)} events (a flapping node); the whole stream is read (docs/design.md §3), so a ` +
      `${target.days}-day stream of ~${fmt(transitionsPerNodeDay * target.days + 2 * target.days + 576)} events costs about that many times more per event`,
  });
  // Archived bytes per event of a type: its lines' share of the segments, at the segments' own
  // compression ratio (types are mixed in a segment, which is what brotli sees).
  const ratio = archived.bytes / archived.rawBytes;
  const archivedPerEvent = (t: string): number => {
    const a = archived.byType.get(t);
    return a === undefined ? 0 : (a.rawBytes / a.events) * ratio;
  };
  for (const t of types) {
    const a = archived.byType.get(t);
    if (a === undefined) continue;
    report.row({
      name: `archived bytes per ${t}, against on disk in the store`,
      unit: 'B',
      better: 'lower',
      converge: archivedPerEvent(t),
      baseline: perEvent.get(t)!,
      notes: `${fmt(a.events)} archived; ${fmt(a.rawBytes / a.events, 0)} B as a segment line before compression`,
    });
  }
  const archivedNodeDay = types.reduce((s, t) => s + perNodeDay(normalDays, t) * archivedPerEvent(t), 0);
  const archivedBadDay = types.reduce((s, t) => s + perNodeDay([perDay[days]!], t) * archivedPerEvent(t), 0);
  const hotYearGB = (target.nodes * 30 * normal) / 1e9;
  const archivedYearGB = (target.nodes * ((target.days - 31) * archivedNodeDay + archivedBadDay + firstHeard * ratio)) / 1e9;
  report.row({
    name: `store size, ${fmt(target.nodes)} nodes × ${target.days} days, hot (30 days) + archived (335 days), against all hot`,
    unit: 'GB',
    better: 'lower',
    converge: hotYearGB + archivedYearGB,
    baseline: yearGB,
    goal: { atMost: 100 },
    notes:
      `moonshot ≤ 30 GB; hot ${fmt(hotYearGB, 2)} GB + archived ${fmt(archivedYearGB, 2)} GB (${fmt(archivedNodeDay, 1)} B per node per ` +
      `ordinary day archived, against ${fmt(normal, 0)} hot); each node also keeps its last event, send and report hot`,
  });
  report.row({
    name: 'state --at day 1 noon through the archive, first call (what one CLI run pays), against before archiving',
    unit: 'ms',
    better: 'lower',
    converge: archived.asOfArchived[0]!,
    baseline: asOf[0]!,
    notes:
      `a stream's read decompresses only the blocks of each segment that hold it (${fmt(archived.segments)} segment(s), ` +
      `${fmt(archived.blocks)} blocks here); a CLI run is one such read`,
  });
  report.row({
    name: 'state --at day 1 noon through the archive, segments already read (same process), against before archiving',
    unit: 'ms',
    better: 'lower',
    converge: archived.asOfArchived.slice(1),
    baseline: asOf.slice(1),
    notes: "other nodes: each segment's block table is kept, each node's blocks are read afresh",
  });
  report.note(
    `Archive: ${fmt(archived.events)} events into ${fmt(archived.segments)} segment(s), ${fmt(archived.rawBytes / 1e6, 1)} MB of lines, ` +
      `${fmt(archived.bytes / 1e6, 2)} MB on disk (brotli quality 4), moved in ${fmt(archived.archiveS, 1)} s. ` +
      `${archived.codecBytes < archived.rawBytes ? `The first ${fmt(archived.codecBytes / 1e6, 1)} MB of the same lines` : 'The same lines'} compressed whole: ` +
      `${archived.codecs.map((c) => `${c.codec} ${fmt(c.bytes / 1e6, 2)} MB in ${fmt(c.ms, 0)} ms`).join(', ')}.`,
  );
  const day = (ds: Map<string, number>): string => types.map((t) => `${t} ${fmt(ds.get(t) ?? 0)}`).join(', ');
  report.note(`Events on day 1: ${day(perDay[0]!)}. On day 2: ${day(perDay[Math.min(1, days)]!)}. On the bad day: ${day(perDay[days]!)}.`);
  report.note(
    `Store: ${fmt(totalBytes / 1e6, 1)} MB after ${fmt([...counts.values()].reduce((a, b) => a + b, 0))} events, written in ${fmt(writeS, 1)} s; ` +
      `by table and index (dbstat): ${tables.map((t) => `${t.name} ${fmt(t.bytes / 1e6, 1)} MB`).join(', ')}.`,
  );
  report.note(
    'Extrapolated, not measured: the year is the measured bytes per event × events per node per day × 100,000 nodes × 365 days ' +
      '(B-tree depth grows with the store, so a real year may cost a few % more per event). Liveness is simulated a minute at a time ' +
      '(every node up is heard each minute; the recorder appends only transitions, so finer alives would add nothing). No engine ' +
      'restart is modelled: each adds one NodeHeard per node. Declarations hold two small resources; larger specs cost more per send. ' +
      "The warm starts and state --at are measured at this run's size (nodes, days), not extrapolated: state --at reads the node's whole " +
      "stream, which a year makes ~45× longer than a week; a warm start's cross-check reads about one event per node, whatever the history's length.",
  );
  report.end();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
