// What signed checkpoints cost the engine (src/engine/auditCheckpoints.ts, docs/audit.md#checkpoints-and-witnesses):
// appends to a SQLite store as serve's ingest makes them (the writer thread, batches of 100 reports, 8
// in flight) with the
// checkpointer running as serve runs it (the head read once a second, a checkpoint every 10,000
// events, a witness folder) against the same appends without it, passes alternating. Notes give
// one checkpoint's cost (sign, append, hand to the folder) and one read of the head.
//
//   npm run bench -- auditCheckpoints      BENCH_CHECKPOINT_EVENTS=200000 BENCH_PASSES=3
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { auditStream, makeReportReceived, streamOf } from '../src/core/events/index.ts';
import { createAuditCheckpoints } from '../src/engine/auditCheckpoints.ts';
import { createFolderWitness } from '../src/engine/auditWitness.ts';
import { createSqliteEventStore } from '../src/store/sqlite/sqliteEventStore.ts';
import type { EventStore, NewEvent } from '../src/store/port.ts';
import { createBenchReport } from './support/report.ts';

const scale = Number(process.env['CONVERGE_BENCH_SCALE'] ?? 1);
const total = Math.max(20_000, Math.round(Number(process.env['BENCH_CHECKPOINT_EVENTS'] ?? 200_000) * scale));
const passes = Number(process.env['BENCH_PASSES'] ?? 3);
const batch = 100;
const logger = pino({ level: 'silent' });
const key = generateKeyPairSync('ed25519').privateKey;
const dir = mkdtempSync(join(tmpdir(), 'converge-bench-cp-'));

const report = (i: number): NewEvent => {
  const node = `web-${String(i % 1000).padStart(4, '0')}`;
  return makeReportReceived(
    { node, applied: ['nginx'], failed: {}, refused: '', carried: [], declared: 'a'.repeat(64) },
    Buffer.from(String(i)),
    { messageId: `m-${i}`, redelivered: false, userId: node },
    Date.UTC(2026, 0, 1) + i,
  ) as NewEvent;
};

let run = 0;
async function pass(withCheckpoints: boolean): Promise<{ rate: number; checkpoints: number }> {
  const path = join(dir, `pass${++run}.db`);
  const store: EventStore = createSqliteEventStore(path, { sync: 'thread' });
  const witness = join(dir, `witness${run}`);
  const cp = withCheckpoints
    ? createAuditCheckpoints({
        store,
        key,
        logger,
        everyEvents: 10_000,
        everyMs: 60_000,
        witnesses: [createFolderWitness(witness, logger)],
      })
    : null;
  await cp?.start();
  const t = performance.now();
  // As ingest appends: the next batches while earlier ones are committed (EventStore.pipeline), 8 in flight.
  const pipe = store.pipeline?.() ?? store;
  const inFlight: Promise<unknown>[] = [];
  for (let i = 0; i < total; i += batch) {
    const events: NewEvent[] = [];
    for (let k = i; k < i + batch; k++) events.push(report(k));
    inFlight.push(pipe.append([{ stream: streamOf(`web-${String((i / batch) % 1000).padStart(4, '0')}`), expected: 'any', events }]));
    if (inFlight.length >= 8) await inFlight.shift();
  }
  await Promise.all(inFlight);
  const ms = performance.now() - t;
  await cp?.stop();
  const checkpoints = (await store.readStream(auditStream)).length;
  await store.close();
  if (cp !== null && readdirSync(witness).length !== checkpoints) throw new Error('the witness folder missed a checkpoint');
  rmSync(path, { force: true });
  return { rate: total / (ms / 1000), checkpoints };
}

/** One checkpoint's cost alone: head read, sign, append, handed to the folder; and one head read. */
async function unitCosts(): Promise<{ checkpointMs: number; headUs: number }> {
  const store = createSqliteEventStore(join(dir, 'unit.db'), { sync: 'thread' });
  const cp = createAuditCheckpoints({
    store,
    key,
    logger,
    everyEvents: 1,
    everyMs: 60_000,
    pollMs: 3_600_000,
    witnesses: [createFolderWitness(join(dir, 'unit-witness'), logger)],
  });
  await cp.start();
  const n = 200;
  let ms = 0;
  for (let i = 0; i < n; i++) {
    await store.append([{ stream: streamOf('web-0000'), expected: 'any', events: [report(i)] }]);
    const t = performance.now();
    await cp.checkpoint();
    ms += performance.now() - t;
  }
  await cp.stop();
  const t = performance.now();
  for (let i = 0; i < 10_000; i++) await store.auditHead();
  const headUs = ((performance.now() - t) / 10_000) * 1000;
  await store.close();
  return { checkpointMs: ms / n, headUs };
}

const without: number[] = [];
const withCp: number[] = [];
let made = 0;
for (let p = 0; p < passes; p++) {
  without.push((await pass(false)).rate);
  const r = await pass(true);
  withCp.push(r.rate);
  made = r.checkpoints;
}
const unit = await unitCosts();
rmSync(dir, { recursive: true, force: true });

const out = createBenchReport(
  'Audit checkpoints',
  "SQLite appends as serve's ingest makes them (writer thread, batches of 100 reports, 8 in flight) with the engine's checkpointer running (head read once a second, a checkpoint every 10,000 events, a witness folder) against the same appends without it, in the same run.",
);
out.row({
  name: `append ${total.toLocaleString('en-US')} reports in batches of ${batch}, checkpointer on`,
  unit: 'events/s',
  converge: withCp,
  baseline: without,
  goal: { ratioAtLeast: 0.95 },
  notes: `${made} checkpoints in the last pass (a checkpoint at the first poll after each 10,000 events, and one on stop)`,
});
out.note(
  `one checkpoint (head read, Ed25519 signature, append to the audit stream, handed to the witness folder): ${unit.checkpointMs.toFixed(2)} ms, mean of 200`,
);
out.note(`one read of the head (auditHead, what the checkpointer polls once a second): ${unit.headUs.toFixed(1)} µs, mean of 10,000`);
out.end();
