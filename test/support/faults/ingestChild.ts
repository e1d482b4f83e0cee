// A child process that runs the engine's ingest (AMQP → SQLite) and, as `converge serve` does,
// the projection runner with its read-model snapshot, for the fault scenario that SIGKILLs the
// engine mid-load and starts it again (test/faults/scenarios.ts). Arguments come in the
// environment so nothing secret shows in `ps`:
//   CONVERGE_FAULT_AMQP_URL        engine's broker URL (with vhost)
//   CONVERGE_FAULT_STORE           path of the SQLite store file
//   CONVERGE_FAULT_SNAPSHOT        read-model snapshot path (optional; none: no projections)
//   CONVERGE_FAULT_SNAPSHOT_EVERY  events between snapshots (default 250: many snapshots per run,
//                                  so kills land during snapshot writes too)
// Prints one line `ready` on stdout once consuming; on SIGTERM stops cleanly (SIGKILL is the point).
import pino from 'pino';
import { createProjectionRunner } from '../../../src/readModel/projectionRunner.ts';
import type { ProjectionRunner } from '../../../src/readModel/projectionRunner.ts';
import { createSqliteEventStore } from '../../../src/store/sqlite/sqliteEventStore.ts';
import { startIngestOverAmqp } from './ingestOverAmqp.ts';

const url = process.env['CONVERGE_FAULT_AMQP_URL'];
const path = process.env['CONVERGE_FAULT_STORE'];
const snapshotPath = process.env['CONVERGE_FAULT_SNAPSHOT'];
if (!url || !path) {
  process.stderr.write('ingestChild: CONVERGE_FAULT_AMQP_URL and CONVERGE_FAULT_STORE are required\n');
  process.exit(2);
}
const logger = pino({ level: process.env['LOG_LEVEL'] ?? 'silent' }, pino.destination(2));
const store = createSqliteEventStore(path);
let runner: ProjectionRunner | null = null;
if (snapshotPath) {
  // Start order as in createServer (src/engine/engine.ts): projections first, then ingest.
  runner = createProjectionRunner({
    store,
    logger,
    snapshot: { path: snapshotPath, everyEvents: Number(process.env['CONVERGE_FAULT_SNAPSHOT_EVERY'] ?? 250) },
  });
  await runner.start();
}
const engine = await startIngestOverAmqp({ url, store, logger, connectionName: 'converge-fault-ingest-child' });
process.stdout.write('ready\n');

process.once('SIGTERM', () => {
  void (async () => {
    await engine.stop();
    await runner?.writeSnapshot();
    await runner?.stop();
    await store.close();
    process.exit(0);
  })();
});
