// Replay benchmark (DESIGN §3, STYLE.md §9): fold 1,000,000 stored events into the read model
// from zero, beside the store's raw read rate measured in the same run (ratio = fold / raw read),
// and the resident memory of the read model per 10,000 nodes.
// Run: npm run bench -- replay   (CONVERGE_BENCH_SCALE=0.1 for a quick look)
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import pino from 'pino';
import { createProjectionRunner } from '../src/readModel/projectionRunner.ts';
import { createReadModel } from '../src/readModel/readModel.ts';
import { replayStore } from '../src/readModel/replay.ts';
import { aliveSeenId, declarationSentId, reportReceivedId, streamOf } from '../src/events/index.ts';
import type { NodeEvent, Recorded } from '../src/events/index.ts';
import { createSqliteEventStore } from '../src/store/sqliteEventStore.ts';
import type { NewEvent, StreamWrite } from '../src/store/index.ts';
import { createBenchReport } from './support/report.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const scale = Number(process.env.CONVERGE_BENCH_SCALE ?? 1);
const total = Math.round(1_000_000 * scale);
const nodes = 10_000;
const t0 = Date.parse('2026-01-01T00:00:00Z');
const sig = Buffer.alloc(64, 1).toString('base64');
const decl = Buffer.from('{"node":"x","serial":1,"issued":"2026-01-01T00:00:00Z","resources":[{"id":"web"},{"id":"db"}]}').toString(
  'base64',
);
const digestOf = (node: string, serial: number): string => createHash('sha256').update(`${node}/${serial}`).digest('hex');

/** Per node, a cycle of send → alive → matching report → alive (every fourth report is stale). */
function eventAt(k: number): NewEvent<NodeEvent> {
  const node = `n${k % nodes}`;
  const round = Math.floor(k / nodes);
  const serial = Math.floor(round / 4) + 1;
  const at = new Date(t0 + k * 10).toISOString();
  switch (round % 4) {
    case 0:
      return {
        id: declarationSentId(node, serial),
        type: 'DeclarationSent',
        data: {
          node,
          serial,
          digest: digestOf(node, serial),
          specDigest: digestOf('spec', round % 8),
          declaration: decl,
          signature: sig,
          keyId: 'k',
          resourceIds: ['web', 'db'],
          sentAt: at,
        },
      };
    case 2: {
      const declared = digestOf(node, serial > 1 && serial % 4 === 0 ? serial - 1 : serial);
      return {
        id: reportReceivedId(node, `m${k}`, Buffer.alloc(0)),
        type: 'ReportReceived',
        data: {
          node,
          declared,
          applied: ['web', 'db'],
          failed: {},
          refused: '',
          carried: [],
          receivedAt: at,
          transport: { messageId: `m${k}`, redelivered: false, userId: node },
        },
      };
    }
    default:
      return { id: aliveSeenId(node, at), type: 'AliveSeen', data: { node, seenAt: at } };
  }
}

const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');
const dir = mkdtempSync(join(tmpdir(), 'converge-bench-replay-'));
const store = createSqliteEventStore(join(dir, 'replay.db'));
try {
  process.stdout.write(`filling a SQLite store with ${fmt(total)} events over ${fmt(nodes)} nodes… `);
  const fillStart = performance.now();
  for (let k = 0; k < total; k += 2_000) {
    const byStream = new Map<string, NewEvent<NodeEvent>[]>();
    for (let j = k; j < Math.min(total, k + 2_000); j++) {
      const e = eventAt(j);
      const s = streamOf(e.data.node);
      (byStream.get(s) ?? byStream.set(s, []).get(s)!).push(e);
    }
    const writes: StreamWrite[] = [...byStream].map(([stream, events]) => ({ stream, expected: 'any', events }));
    await store.append(writes);
  }
  console.log(`${((performance.now() - fillStart) / 1000).toFixed(1)} s`);

  // Baseline: the store's raw read of everything, decoding events and nothing else.
  let s = performance.now();
  let raw = 0;
  for await (const batch of store.readAll({ streamPrefix: 'node-' })) raw += batch.length;
  const rawSec = (performance.now() - s) / 1000;

  // The replay that `replay --verify` runs: the same read, plus the pure fold of every event.
  s = performance.now();
  const states = await replayStore(store);
  const foldSec = (performance.now() - s) / 1000;

  // The live path: a projection runner's subscription into the read model, from zero.
  const runner = createProjectionRunner({ store, logger: pino({ level: 'silent' }), batchSize: 2_000 });
  s = performance.now();
  await runner.start();
  await runner.caughtUp();
  const runnerSec = (performance.now() - s) / 1000;
  await runner.stop();

  // Memory: the read model of 10,000 nodes (each sent 1..25 declarations, reporting and alive),
  // measured as heap growth after a full GC, beside the heap of the same count of empty objects.
  const sample: Recorded[] = [];
  for await (const batch of store.readAll({ streamPrefix: 'node-' })) sample.push(...batch);
  gc();
  const before = process.memoryUsage();
  const model = createReadModel();
  model.apply(sample);
  gc();
  const after = process.memoryUsage();
  const baseGc = process.memoryUsage().heapUsed;
  const empties = Array.from({ length: model.size() }, (_, i) => ({ node: `n${i}` }));
  gc();
  const emptyBytes = process.memoryUsage().heapUsed - baseGc;
  const perTenK = ((after.heapUsed - before.heapUsed) / model.size()) * 10_000;
  const bareTenK = (emptyBytes / empties.length) * 10_000;
  const mib = (bytes: number): number => bytes / 1024 / 1024;

  const report = createBenchReport(
    'Replay: folding the store into the read model',
    `A SQLite store of ${fmt(total)} events over ${fmt(nodes)} nodes (per node: send, alive, report — every fourth stale —, alive) ` +
      "folded from zero, against the store's raw read of the same events (decoding and nothing else) in the same run; " +
      'and the heap the read model of those nodes holds.',
  );
  report.row({
    name: 'replay from zero (the fold `replay --verify` runs)',
    unit: 'events/s',
    converge: total / foldSec,
    baseline: raw / rawSec,
    notes: `${fmt(states.size)} nodes, ${foldSec.toFixed(2)} s; baseline: raw store read, ${rawSec.toFixed(2)} s`,
  });
  report.row({
    name: 'projection runner catch-up from zero',
    unit: 'events/s',
    converge: total / runnerSec,
    baseline: raw / rawSec,
    notes: `${runnerSec.toFixed(2)} s`,
  });
  report.row({
    name: 'read model heap per 10,000 nodes',
    unit: 'MiB',
    better: 'lower',
    converge: mib(perTenK),
    baseline: mib(bareTenK),
    notes: `baseline: 10,000 bare {node} objects; rss ${mib(after.rss).toFixed(0)} MiB total`,
  });
  report.end();
} finally {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}
