import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { loadConfig } from '../../src/app/config.ts';
import { createServer } from '../../src/app/server.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { createAmqpTransport } from '../../src/transport/amqpTransport.ts';
import { mountTinyTmpfs } from '../support/faults/tinyTmpfs.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';
import { settleAll, startLoad, tally, withNodes } from './scenarios.ts';
import type { Scenario, ScenarioResult } from './scenarios.ts';

// A stuck ingest, as the probes and the metrics see it (with SQLite full, /healthz
// and /readyz said ready with lag 0 and no metric showed ingest failing). `serve`'s composition
// (createServer over RabbitMQ) on SQLite in a 192 KiB tmpfs, three nodes reporting until the disk
// is full; then, over HTTP: /readyz must answer 503 CONVERGE_ERR_INGEST_FAILING, /healthz 200 with
// ingest unhealthy, /metrics converge_ingest_healthy 0 with deliveries pending; after the tmpfs
// is remounted larger, ready again and every confirmed report stored once.

const metric = (text: string, name: string): number | null => {
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  return m === null ? null : Number(m[1]);
};

const skipped = (reason: string): ScenarioResult => ({
  scenario: stuckIngestHealth.name,
  faults: stuckIngestHealth.faults,
  sent: 0,
  confirmed: 0,
  stored: 0,
  lost: 0,
  duplicated: 0,
  hostileTried: 0,
  hostileAppended: 0,
  recoverMs: null,
  notes: [`skipped: ${reason}`],
  checks: {},
});

export const stuckIngestHealth: Scenario = {
  name: 'stuck ingest seen by health',
  faults:
    'serve on SQLite in a 192 KiB tmpfs fills it (SQLITE_FULL) under load; /readyz, /healthz and /metrics read while full; then remounted at 64 MiB',
  run: async (lab) => {
    const fs = mountTinyTmpfs(192);
    if ('unavailable' in fs) return skipped(fs.unavailable);
    try {
      return await withNodes(lab, 'stuck', 3, async (nodes) => {
        const path = join(fs.dir, 'events.db');
        const store = createSqliteEventStore(path);
        const amqp = await createAmqpTransport({ url: lab.engineUrl, logger, connectionName: 'converge-fault-engine' });
        const config = loadConfig({ flags: {}, env: {} }, { store: `sqlite:${path}`, port: '0', logLevel: 'silent' });
        const engine = createServer({
          config,
          logger,
          store,
          transport: { ingestSource: amqp.ingestSource(), publisher: amqp.declarationPublisher() },
        });
        await engine.start();
        const get = (url: string) => engine.app.inject({ method: 'GET', url });
        // Reports from every node, back to back, until the disk has been remounted.
        const load = startLoad(nodes, Infinity, 0);
        try {
          const filled = await until('the disk to fill and ingest to hold', () => engine.ingest?.isHealthy() === false, 60_000).then(
            () => true,
            () => false,
          );
          const readyWhileFull = await get('/readyz');
          const healthWhileFull = await get('/healthz');
          const metricsWhileFull = (await get('/metrics')).body;
          const code = (readyWhileFull.json() as { code?: string }).code;
          const pending = metric(metricsWhileFull, 'converge_ingest_pending') ?? 0;

          await promisify(execFile)('mount', ['-o', 'remount,size=64m', fs.dir]);
          const lifted = Date.now();
          const recoverMs = await until('/readyz 200 again', async () => (await get('/readyz')).statusCode === 200, 60_000).then(
            () => Date.now() - lifted,
            () => null,
          );
          load.stop();
          await load.done;
          await settleAll(() => store, load);
          const metricsAfter = (await get('/metrics')).body;
          return await tally(stuckIngestHealth, store, load, recoverMs, {
            notes: [
              `while full: /readyz ${readyWhileFull.statusCode} ${code ?? ''}, /healthz ${healthWhileFull.statusCode} with ingest.healthy ${String((healthWhileFull.json() as { ingest?: { healthy: boolean } }).ingest?.healthy)}, converge_ingest_healthy ${metric(metricsWhileFull, 'converge_ingest_healthy')}, ${pending} deliveries pending; time to recover = remount until /readyz 200`,
            ],
            checks: {
              diskFilled: filled,
              readyzSaidIngestFailing: readyWhileFull.statusCode === 503 && code === 'CONVERGE_ERR_INGEST_FAILING',
              healthzAliveAndSaidUnhealthy:
                healthWhileFull.statusCode === 200 &&
                (healthWhileFull.json() as { ingest?: { healthy: boolean } }).ingest?.healthy === false,
              metricsSaidUnhealthy: metric(metricsWhileFull, 'converge_ingest_healthy') === 0 && pending > 0,
              metricsSayHealthyAgain: metric(metricsAfter, 'converge_ingest_healthy') === 1,
            },
          });
        } finally {
          load.stop();
          await load.done;
          await engine.stop();
          await amqp.close();
          await store.close();
        }
      });
    } finally {
      fs.unmount();
    }
  },
};
