// A child process running the whole engine as `converge serve` builds it (createServer over
// RabbitMQ and SQLite: ingest, relay, projections and the rollout driver), for the fault scenario
// that SIGKILLs it while a rollout runs (test/faults/rolloutSigkillScenario.ts). Arguments come in
// the environment so nothing secret shows in `ps`:
//   CONVERGE_FAULT_AMQP_URL   engine's broker URL (with vhost)
//   CONVERGE_FAULT_STORE      path of the SQLite store file
//   CONVERGE_FAULT_KEY_SEED   the signing key's 32-byte seed, hex
// Prints one line `ready` on stdout once serving; on SIGTERM stops cleanly (SIGKILL is the point).
import pino from 'pino';
import { signingKeyFromSeed } from '../../../src/core/declaration/index.ts';
import { startEngineOverAmqp } from './engineOverAmqp.ts';

const url = process.env['CONVERGE_FAULT_AMQP_URL'];
const path = process.env['CONVERGE_FAULT_STORE'];
const seed = process.env['CONVERGE_FAULT_KEY_SEED'];
if (!url || !path || !seed) {
  process.stderr.write('rolloutEngineChild: CONVERGE_FAULT_AMQP_URL, CONVERGE_FAULT_STORE and CONVERGE_FAULT_KEY_SEED are required\n');
  process.exit(2);
}
const logger = pino({ level: process.env['LOG_LEVEL'] ?? 'silent' }, pino.destination(2));
const engine = await startEngineOverAmqp({ url, storePath: path, key: signingKeyFromSeed(Buffer.from(seed, 'hex')), logger });
process.stdout.write('ready\n');

process.once('SIGTERM', () => {
  void engine.stop().then(() => process.exit(0));
});
