import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig } from '../../src/app/config.ts';
import { createServer } from '../../src/app/server.ts';
import type { Server } from '../../src/app/server.ts';
import { generateSigningKey } from '../../src/core/declaration/index.ts';
import { verifyReadModel, replayStore } from '../../src/readModel/replay.ts';
import { readSnapshot, writeSnapshot } from '../../src/readModel/snapshot/snapshotFile.ts';
import type { SnapshotRejection } from '../../src/readModel/snapshot/snapshotFile.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { createAmqpTransport } from '../../src/transport/amqpTransport.ts';
import { encodeReport } from '../../src/core/wire/index.ts';
import type { NodeState } from '../../projections/index.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';
import { countStored, publishUntilConfirmed, readStored, timeToStore, withNodes } from './scenarios.ts';
import type { Scenario, ScenarioResult } from './scenarios.ts';

// A forged read-model snapshot (one with forged values and the right
// foldVersion, position and event id was restored and served). `serve`'s composition over
// RabbitMQ and SQLite: declarations sent to three nodes, which report over the broker; a clean
// stop writes the snapshot. Then, one at a time, the snapshot is forged and the engine started on
// it again — a value changed and the file resealed by the module's own writer (right header, a
// checksum that matches), a count of the wrong type (resealed), one byte changed without
// resealing, the file cut short — and each time the engine must refuse it for its reason
// (converge_snapshot_rejected_total{reason}), fold from zero, and serve the store's truth over
// HTTP. Last, the honest snapshot the engine wrote is restored. Time to recover: the longest
// start on a forged snapshot, spawn of the engine to /readyz 200.

const reportsPerNode = 20;

type Forgery = Readonly<{ name: string; reason: SnapshotRejection; forge: (path: string, victim: string) => Promise<void> }>;

const resealed = (edit: (s: NodeState) => NodeState) => async (path: string, victim: string) => {
  const snap = await readSnapshot(path);
  if (snap === null) throw new Error('no snapshot to forge');
  await writeSnapshot(path, { ...snap, states: snap.states.map((s) => (s.node === victim ? edit(s) : s)) });
};

const forgeries: readonly Forgery[] = [
  { name: 'reports count raised, resealed', reason: 'cross-check', forge: resealed((s) => ({ ...s, reports: s.reports + 100 })) },
  {
    name: 'reports of the wrong type, resealed',
    reason: 'schema',
    forge: resealed((s) => ({ ...s, reports: 'NaN' }) as unknown as NodeState),
  },
  {
    name: 'a byte changed, not resealed',
    reason: 'checksum',
    forge: async (path) => {
      const bytes = readFileSync(path);
      const i = Math.floor(bytes.length / 2);
      bytes[i] = bytes[i] === 0x31 ? 0x32 : 0x31;
      writeFileSync(path, bytes);
    },
  },
  {
    name: 'cut short',
    reason: 'truncated',
    forge: async (path) => writeFileSync(path, readFileSync(path).subarray(0, Math.floor(readFileSync(path).length * 0.7))),
  },
];

const rejectedCount = (metrics: string, reason: string): number =>
  Number(new RegExp(`^converge_snapshot_rejected_total\\{reason="${reason}"\\} (\\S+)$`, 'm').exec(metrics)?.[1] ?? 0);

export const forgedSnapshot: Scenario = {
  name: 'forged snapshot',
  faults:
    'the read-model snapshot serve wrote, forged between runs: a value changed and resealed, a wrong type resealed, a byte changed, the file cut short; serve restarted on each',
  run: (lab) =>
    withNodes(lab, 'forge', 3, async (nodes) => {
      const path = join(lab.dir, 'forged.db');
      const config = loadConfig({ flags: {}, env: {} }, { store: `sqlite:${path}`, port: '0', logLevel: 'silent' });
      const snapPath = config.snapshotPath!;
      const key = generateSigningKey();
      const start = async (): Promise<{ engine: Server; store: EventStore; stop: () => Promise<void> }> => {
        const store = createSqliteEventStore(path);
        const amqp = await createAmqpTransport({ url: lab.engineUrl, logger, connectionName: 'converge-fault-engine' });
        const engine = createServer({
          config,
          logger,
          store,
          key,
          transport: { ingestSource: amqp.ingestSource(), publisher: amqp.declarationPublisher() },
        });
        await engine.start();
        return {
          engine,
          store,
          stop: async () => {
            await engine.stop();
            await amqp.close();
            await store.close();
          },
        };
      };

      // The history: a declaration per node, then reports over the broker naming it.
      let run = await start();
      const confirmed = new Set<string>();
      let sent = 0;
      for (const n of nodes) {
        const { digest } = await run.engine.send!(n.node, [{ id: 'web' }, { id: 'db' }]);
        for (let i = 0; i < reportsPerNode; i++) {
          const id = `${n.node}/${i}`;
          const body = encodeReport({
            node: n.node,
            applied: ['web', 'db'],
            failed: {},
            refused: '',
            carried: [8000 + i],
            declared: digest,
          });
          sent++;
          if (await publishUntilConfirmed(n.link, 'report', body, id, () => false)) confirmed.add(id);
        }
      }
      const head = async (): Promise<bigint> => (await run.store.headPosition()) ?? 0n;
      await timeToStore(() => run.store, confirmed);
      await until('every stored report folded', async () => run.engine.runner.readModel.position() === (await head()));
      await run.stop();

      const victim = nodes[0]!.node;
      const checks: Record<string, boolean> = {};
      const notes: string[] = [];
      let recoverMs = 0;
      for (const f of forgeries) {
        await f.forge(snapPath, victim);
        const t0 = performance.now();
        run = await start();
        await until('/readyz 200', async () => (await run.engine.app.inject({ method: 'GET', url: '/readyz' })).statusCode === 200);
        const ms = performance.now() - t0;
        recoverMs = Math.max(recoverMs, ms);
        const metrics = (await run.engine.app.inject({ method: 'GET', url: '/metrics' })).body;
        const truth = (await replayStore(run.store)).get(victim);
        const served = (await run.engine.app.inject({ method: 'GET', url: `/v1/nodes/${victim}` })).json() as { reports?: unknown };
        const diffs = await verifyReadModel(run.store, run.engine.runner.readModel);
        checks[`${f.name}: refused (${f.reason})`] = rejectedCount(metrics, f.reason) === 1;
        checks[`${f.name}: the store's truth served`] = diffs.length === 0 && served.reports === truth?.reports;
        notes.push(`${f.name}: ready in ${Math.round(ms)} ms, served reports ${String(served.reports)} (store: ${truth?.reports})`);
        await run.stop(); // writes an honest snapshot: the fold from zero
      }
      run = await start();
      const metrics = (await run.engine.app.inject({ method: 'GET', url: '/metrics' })).body;
      const honestRestored =
        !/^converge_snapshot_rejected_total\{/m.test(metrics) &&
        (await verifyReadModel(run.store, run.engine.runner.readModel)).length === 0;
      checks['the honest snapshot written after is restored'] = honestRestored;
      const { reports } = await readStored(run.store);
      await run.stop();

      return {
        scenario: forgedSnapshot.name,
        faults: forgedSnapshot.faults,
        sent,
        confirmed: confirmed.size,
        ...countStored(reports, confirmed),
        hostileTried: forgeries.length,
        hostileAppended: 0,
        recoverMs,
        notes: [
          `${nodes.length} nodes, ${reportsPerNode} reports each; time to recover = the slowest start on a forged snapshot`,
          ...notes,
        ],
        checks,
      } satisfies ScenarioResult;
    }),
};
