import assert from 'node:assert/strict';
import { createPrivateKey } from 'node:crypto';
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { loadConfig } from '../../src/app/config.ts';
import { createServer } from '../../src/app/server.ts';
import { signCheckpoint } from '../../src/core/audit/checkpoint.ts';
import { parseWitnessJson } from '../../src/core/audit/checkpointCheck.ts';
import { auditStream, makeAuditCheckpointed } from '../../src/core/events/index.ts';
import { createAuditCheckpoints } from '../../src/engine/auditCheckpoints.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { writeHistory } from '../support/auditHistory.ts';
import { cliIn } from '../support/cliInProcess.ts';
import { logger } from '../support/logger.ts';

// Signed checkpoints end to end (docs/audit.md#checkpoints-and-witnesses): keygen --audit, serve
// with --audit-key and --witness-dir (a checkpoint on stop), and `audit verify` catching a forged
// signature and a log rewritten and signed again with another key, against the witness's files.

const dir = mkdtempSync(join(tmpdir(), 'converge-audit-cp-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const keys = join(dir, 'keys');
const otherKeys = join(dir, 'other');
const witness = join(dir, 'witness');
const good = join(dir, 'good.db');

test('keygen --audit writes the audit key pair, the private key 0600, and never over an existing one', async () => {
  const r = await cliIn(dir, ['keygen', '--audit', 'keys']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /audit key id [0-9a-f]{16}/);
  assert.equal(statSync(join(keys, 'audit.key')).mode & 0o777, 0o600);
  assert.match(readFileSync(join(keys, 'audit.pub'), 'utf8'), /BEGIN PUBLIC KEY/);
  const again = await cliIn(dir, ['keygen', '--audit', 'keys']);
  assert.notEqual(again.code, 0);
  assert.match(again.stderr, /already exists/);
  assert.equal((await cliIn(dir, ['keygen', '--audit', 'other'])).code, 0);
});

test('serve with --audit-key and --witness-dir signs the head on stop; audit verify checks it with the public key', async () => {
  const store = createSqliteEventStore(good);
  await writeHistory(store, 5);
  const config = loadConfig({
    flags: { store: `sqlite:${good}`, port: '0', 'audit-key': join(keys, 'audit.key'), 'witness-dir': witness },
    env: {},
  });
  const engine = createServer({ config, logger, store, dashboardDir: null });
  await engine.start();
  await writeHistory(store, 5, 1); // while serving: only the stop's checkpoint covers these
  await engine.stop();
  const size = Number((await store.auditHead()).size);
  await store.close();
  const files = readdirSync(witness);
  const last = parseWitnessJson(readFileSync(join(witness, files.sort().at(-1)!), 'utf8'));
  assert.equal(typeof last === 'string' ? last : last.checkpoint.size, size - 1, 'the stop checkpoint covers all but itself');

  const r = await cliIn(dir, ['audit', 'verify', '--store', `sqlite:${good}`, '--audit-pub', 'keys/audit.pub', '--witness', 'witness']);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /^checkpoints: [1-9]\d* in the log match the tree, signatures valid$/m);
  assert.match(r.stdout, /^witness: [1-9]\d* checkpoints, every one reproduced by the log$/m);
  const unsigned = await cliIn(dir, ['audit', 'verify', '--store', `sqlite:${good}`]);
  assert.equal(unsigned.code, 0);
  assert.match(unsigned.stdout, /signatures not checked \(no --audit-pub\)/);
});

test('a forged checkpoint signature, appended through the store so the tree holds, is caught with the audit key', async () => {
  const forged = join(dir, 'forged.db');
  copyFileSync(good, forged);
  const store = createSqliteEventStore(forged);
  const head = await store.auditHead();
  const real = signCheckpoint(
    { size: Number(head.size), root: head.root, at: new Date().toISOString() },
    createPrivateKey(readFileSync(join(keys, 'audit.key'))),
  );
  const fake = { ...real, signature: Buffer.alloc(64, 1).toString('base64') };
  await store.append([{ stream: auditStream, expected: 'any', events: [makeAuditCheckpointed(fake)] }]);
  await store.close();
  const r = await cliIn(dir, ['audit', 'verify', '--store', `sqlite:${forged}`, '--audit-pub', 'keys/audit.pub', '--json']);
  assert.equal(r.code, 1, r.stdout);
  const out = JSON.parse(r.stdout);
  assert.equal(out.finding, null, 'the log itself is intact');
  assert.equal(out.checkpoints.finding.kind, 'signature');
  assert.equal(out.checkpoints.finding.size, Number(head.size));
  // Without the key the forgery cannot be told.
  assert.equal((await cliIn(dir, ['audit', 'verify', '--store', `sqlite:${forged}`])).code, 0);
});

test('a log rewritten and signed again with another key verifies alone, and the witness catches it (exit 3, with the size)', async () => {
  const rewritten = join(dir, 'rewritten.db');
  const store = createSqliteEventStore(rewritten);
  // The same shape of history with other content, every event appended through the store: a valid tree.
  await writeHistory(store, 5, 7);
  await writeHistory(store, 5, 1);
  const cp = createAuditCheckpoints({
    store,
    key: createPrivateKey(readFileSync(join(otherKeys, 'audit.key'))),
    logger,
    everyEvents: 1,
    everyMs: 60_000,
    pollMs: 60_000,
  });
  await cp.start();
  await cp.checkpoint();
  await cp.stop();
  await store.close();

  const alone = await cliIn(dir, ['audit', 'verify', '--store', `sqlite:${rewritten}`, '--audit-pub', 'other/audit.pub']);
  assert.equal(alone.code, 0, 'the attacker with store and key makes a log that verifies on its own');
  const caught = await cliIn(dir, [
    'audit',
    'verify',
    '--store',
    `sqlite:${rewritten}`,
    '--audit-pub',
    'other/audit.pub',
    '--witness',
    'witness',
  ]);
  assert.equal(caught.code, 3, caught.stdout + caught.stderr);
  const smallest = Math.min(
    ...readdirSync(witness).map(
      (f) => (parseWitnessJson(readFileSync(join(witness, f), 'utf8')) as { checkpoint: { size: number } }).checkpoint.size,
    ),
  );
  assert.match(
    caught.stdout,
    new RegExp(`^WITNESS CONTRADICTS the log at size ${smallest} \\(root\\):.*it is not signed by the audit key given$`, 'm'),
  );
  // With the real audit key the log's own checkpoints are refused too: signed by another key.
  const withRealKey = await cliIn(dir, [
    'audit',
    'verify',
    '--store',
    `sqlite:${rewritten}`,
    '--audit-pub',
    'keys/audit.pub',
    '--witness',
    'witness',
    '--json',
  ]);
  assert.equal(withRealKey.code, 1);
  const out = JSON.parse(withRealKey.stdout);
  assert.deepEqual([out.checkpoints.finding.kind, out.witness.finding.kind, out.witness.finding.signatureValid], ['key', 'root', true]);
});
