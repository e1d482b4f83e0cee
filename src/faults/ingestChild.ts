// A child process that runs only ingest (AMQP → SQLite), for the fault scenario that SIGKILLs
// the engine mid-load and starts it again (test/faults/scenarios.ts). Arguments come in the
// environment so nothing secret shows in `ps`:
//   CONVERGE_FAULT_AMQP_URL   engine's broker URL (with vhost)
//   CONVERGE_FAULT_STORE      path of the SQLite store file
// Prints one line `ready` on stdout once consuming; on SIGTERM stops cleanly (SIGKILL is the point).
import pino from 'pino';
import { createSqliteEventStore } from '../store/index.ts';
import { startIngestOverAmqp } from './ingestOverAmqp.ts';

const url = process.env['CONVERGE_FAULT_AMQP_URL'];
const path = process.env['CONVERGE_FAULT_STORE'];
if (!url || !path) {
  process.stderr.write('ingestChild: CONVERGE_FAULT_AMQP_URL and CONVERGE_FAULT_STORE are required\n');
  process.exit(2);
}
const logger = pino({ level: process.env['LOG_LEVEL'] ?? 'silent' }, pino.destination(2));
const store = createSqliteEventStore(path);
const engine = await startIngestOverAmqp({ url, store, logger, connectionName: 'converge-fault-ingest-child' });
process.stdout.write('ready\n');

process.once('SIGTERM', () => {
  void (async () => {
    await engine.stop();
    await store.close();
    process.exit(0);
  })();
});
