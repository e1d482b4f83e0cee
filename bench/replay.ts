// Replay benchmark (docs/design.md §3): fold 1,000,000 stored events into the
// read model from zero — the fold `replay --verify` runs, and the projection runner's cold start —
// beside a raw read of the same SQLite file in the same run (better-sqlite3, every row in position
// order, its data JSON.parse'd, nothing else), alternating passes; `converge replay --verify` end
// to end (the built CLI, a child process) with its time and peak memory; and the heap the read
// model holds per 10,000 nodes.
// Run: npm run bench -- replay   (CONVERGE_BENCH_SCALE=0.1 for a quick look; BENCH_REPLAY_PASSES, default 2;
// BENCH_REPLAY_STORE=<path> keeps the filled store there and reuses it on the next run at the same scale)
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import Database from 'better-sqlite3';
import pino from 'pino';
import { createProjectionRunner } from '../src/readModel/projectionRunner.ts';
import { createReadModel } from '../src/readModel/readModel.ts';
import { replayStore } from '../src/readModel/replay.ts';
import { aliveSeenId, declarationSentId, reportReceivedId, streamOf } from '../src/core/events/index.ts';
import type { NodeEvent } from '../src/core/events/index.ts';
import { createSqliteEventStore } from '../src/store/sqlite/sqliteEventStore.ts';
import type { NewEvent, StreamWrite } from '../src/store/index.ts';
import { cliBuilt, cliReplayVerify, replayVerifyArchived } from './support/cliReplay.ts';
import { createBenchReport } from './support/report.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const scale = Number(process.env.CONVERGE_BENCH_SCALE ?? 1);
const total = Math.round(1_000_000 * scale);
const passes = Math.max(1, Number(process.env.BENCH_REPLAY_PASSES ?? 2));
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
/**
 * The whole year's `replay --verify` at the measured rate. bench/history's ordinary day is 5.98
 * events a node (a send, its report, two outages as NodeSilent and NodeHeard); the replay reads
 * and folds each of them, so what bounds it is the year's event count over this rate.
 */
const yearEvents = (sec: number): { events: number; perNodeDay: number; text: string } => {
  const perNodeDay = 5.98;
  const events = 100_000 * 365 * perNodeDay;
  const min = ((sec / total) * events) / 60;
  return {
    events,
    perNodeDay,
    text: `${fmt(min)} min`,
  };
};
const dir = mkdtempSync(join(tmpdir(), 'converge-bench-replay-'));
const keep = process.env['BENCH_REPLAY_STORE'];
const path = keep ?? join(dir, 'replay.db');
const reuse = keep !== undefined && existsSync(keep);
const store = createSqliteEventStore(path);
try {
  if (reuse && (await store.headPosition()) !== BigInt(total)) throw new Error(`${keep} does not hold ${fmt(total)} events: remove it`);
  process.stdout.write(
    reuse ? `reusing ${keep} (${fmt(total)} events)… ` : `filling a SQLite store with ${fmt(total)} events over ${fmt(nodes)} nodes… `,
  );
  const fillStart = performance.now();
  for (let k = 0; !reuse && k < total; k += 2_000) {
    const byStream = new Map<string, NewEvent<NodeEvent>[]>();
    for (let j = k; j < Math.min(total, k + 2_000); j++) {
      const e = eventAt(j);
      const s = streamOf(e.data.node);
      (byStream.get(s) ?? byStream.set(s, []).get(s)!).push(e);
    }
    const writes: StreamWrite[] = [...byStream].map(([stream, events]) => ({ stream, expected: 'any', events }));
    await store.append(writes);
  }
  const fillSec = (performance.now() - fillStart) / 1000;
  console.log(`${fillSec.toFixed(1)} s`);

  // Baseline: a hand-written read of the same file: every row in position order, in pages of
  // 10,000 (raw rows), its data JSON.parse'd. What reading and parsing the log costs, and no more.
  const rawRead = (): number => {
    const db = new Database(path, { readonly: true });
    try {
      const page = db
        .prepare('SELECT position, id, stream, revision, type, data, metadata FROM events WHERE position > ? ORDER BY position LIMIT 10000')
        .raw()
        .safeIntegers();
      let after = 0n;
      let n = 0;
      for (;;) {
        let last: bigint | null = null;
        for (const row of page.iterate(after) as IterableIterator<[bigint, string, string, bigint, string, string, string]>) {
          JSON.parse(row[5]);
          last = row[0];
          n++;
        }
        if (last === null) return n;
        after = last;
      }
    } finally {
      db.close();
    }
  };

  /** Wall seconds and CPU µs per event of one call. */
  const timed = async (what: () => Promise<unknown> | unknown): Promise<{ sec: number; cpuUs: number }> => {
    gc();
    const cpu = process.cpuUsage();
    const start = performance.now();
    await what();
    const sec = (performance.now() - start) / 1000;
    const used = process.cpuUsage(cpu);
    return { sec, cpuUs: (used.user + used.system) / total };
  };

  const raw: { sec: number; cpuUs: number }[] = [];
  const fold: { sec: number; cpuUs: number }[] = [];
  const runner: { sec: number; cpuUs: number }[] = [];
  const perEvent: { sec: number; cpuUs: number }[] = [];
  let replayedNodes = 0;
  for (let p = 0; p < passes; p++) {
    raw.push(
      await timed(() => {
        if (rawRead() !== total) throw new Error('the raw read did not see every event');
      }),
    );
    // The replay `replay --verify` runs: the store's columnar read (every row checked against its
    // schema), plus the pure fold of every event.
    fold.push(
      await timed(async () => {
        replayedNodes = (await replayStore(store)).size;
      }),
    );
    // The cold start: a projection runner from zero (its bulk catch-up, then the subscription);
    // and the same with every event through the read model's per-event apply, the live path.
    for (const [into, catchUp] of [
      [runner, 'bulk'],
      [perEvent, 'per-event'],
    ] as const) {
      into.push(
        await timed(async () => {
          const r = createProjectionRunner({ store, logger: pino({ level: 'silent' }), catchUp });
          await r.start();
          await r.caughtUp();
          await r.stop();
        }),
      );
    }
  }

  // `converge replay --verify` as a person runs it: the built CLI over the same file (no snapshot,
  // so against the live projection path: the store folded twice, the replay on a worker thread
  // beside the runner's catch-up), its time, CPU and peak RSS.
  const cli = cliBuilt() ? cliReplayVerify(path) : null;
  // The same after the history went to the archive (a long-lived store under serve --retain): the
  // replay then reads nearly every event from segments.
  const archived = cli === null ? null : await replayVerifyArchived(path, join(dir, 'archived.db'), join(dir, 'archive'));

  // Memory: the read model of 10,000 nodes (each sent 1..25 declarations, reporting and alive),
  // measured as heap growth after a full GC, beside the heap of the same count of empty objects.
  gc();
  const before = process.memoryUsage();
  const model = createReadModel();
  for await (const batch of store.readAll({ streamPrefix: 'node-' })) model.apply(batch);
  gc();
  const after = process.memoryUsage();
  const baseGc = process.memoryUsage().heapUsed;
  const empties = Array.from({ length: model.size() }, (_, i) => ({ node: `n${i}` }));
  gc();
  const emptyBytes = process.memoryUsage().heapUsed - baseGc;
  const perTenK = ((after.heapUsed - before.heapUsed) / model.size()) * 10_000;
  const bareTenK = (emptyBytes / empties.length) * 10_000;
  const mib = (bytes: number): number => bytes / 1024 / 1024;

  const perMillion = (sec: number): number => (sec * 1_000_000) / total;
  const rate = (xs: readonly { sec: number }[]): number[] => xs.map((x) => total / x.sec);
  const report = createBenchReport(
    'Replay: folding the store into the read model',
    `A SQLite store of ${fmt(total)} events over ${fmt(nodes)} nodes (per node: send, alive, report — every fourth stale —, alive) ` +
      "folded from zero, against a raw read of the same file in the same run (better-sqlite3, every row in position order, its data JSON.parse'd, nothing else), " +
      `${passes} alternating passes; \`converge replay --verify\` end to end; and the heap the read model of those nodes holds.`,
  );
  report.row({
    name: 'replay from zero (the fold `replay --verify` runs)',
    unit: 'events/s',
    converge: rate(fold),
    baseline: rate(raw),
    goal: { ratioAtLeast: 0.7 },
    notes: `${fmt(replayedNodes)} nodes; the store read as pages of columns (readNodeColumns) into the draft fold`,
  });
  report.row({
    name: 'cold start: projection runner catch-up from zero',
    unit: 'events/s',
    converge: rate(runner),
    baseline: rate(raw),
    goal: { ratioAtLeast: 0.7 },
    notes: 'the bulk catch-up (ReadModel.catchUpColumns on readNodeColumns: the draft fold on typed columns, published once)',
  });
  report.row({
    name: 'the same catch-up event by event (the live path; `replay --verify` checks it)',
    unit: 'events/s',
    converge: rate(perEvent),
    baseline: rate(raw),
    notes: "catchUp: 'per-event': a new state, tally update and change per event",
  });
  report.row({
    name: 'replay from zero, per 1,000,000 events',
    unit: 's',
    better: 'lower',
    converge: fold.map((x) => perMillion(x.sec)),
    baseline: raw.map((x) => perMillion(x.sec)),
    goal: { atMost: 6 },
  });
  for (const [what, passes] of [
    ['replay from zero', fold],
    ['cold start', runner],
    ['catch-up event by event', perEvent],
  ] as const)
    report.row({
      name: `CPU per event: ${what}`,
      unit: 'µs',
      better: 'lower',
      converge: passes.map((x) => x.cpuUs),
      baseline: raw.map((x) => x.cpuUs),
    });
  if (cli !== null && archived !== null) {
    report.row({
      name: '`converge replay --verify` (CLI, no snapshot: folds twice, on two threads), per 1,000,000 events',
      unit: 's',
      better: 'lower',
      converge: perMillion(cli.sec),
      baseline: Math.min(...raw.map((x) => perMillion(x.sec))),
      goal: { atMost: 6 },
      notes: `CPU ${((cli.cpuSec * 1e6) / total).toFixed(1)} µs/event; peak RSS ${cli.rssMiB.toFixed(0)} MiB; baseline: the raw read's best pass`,
    });
    const year = yearEvents(archived.sec);
    report.row({
      name: '`converge replay --verify` over the archive (a snapshot, the history archived), per 1,000,000 events, against all hot',
      unit: 's',
      better: 'lower',
      converge: perMillion(archived.sec),
      baseline: perMillion(cli.sec),
      notes:
        `${fmt(archived.archived)} of ${fmt(total)} events in ${archived.segments} segments (moved in ${archived.archiveSec.toFixed(1)} s); ` +
        `CPU ${((archived.cpuSec * 1e6) / total).toFixed(1)} µs/event; peak RSS ${archived.rssMiB.toFixed(0)} MiB. ` +
        `A year of 100,000 nodes (${fmt(year.events / 1e6)} M events at bench/history's ${year.perNodeDay} a node a day) at this rate: ${year.text}`,
    });
  } else {
    report.note('`converge replay --verify` not measured: dist/ is missing (npm run build).');
  }
  report.row({
    name: 'read model heap per 10,000 nodes',
    unit: 'MiB',
    better: 'lower',
    converge: mib(perTenK),
    baseline: mib(bareTenK),
    notes: `baseline: 10,000 bare {node} objects; rss ${mib(after.rss).toFixed(0)} MiB total`,
  });
  report.note(
    `${reuse ? 'Store reused (BENCH_REPLAY_STORE)' : `Store filled through src/store in ${fillSec.toFixed(1)} s`}. Wall-clock on a shared 2-core machine: read the ratios.`,
  );
  report.end();
} finally {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}
