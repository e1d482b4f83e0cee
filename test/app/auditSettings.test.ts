import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { loadConfig } from '../../src/app/config.ts';
import { isConvergeError } from '../../src/core/errors.ts';
import { tempDir } from '../support/tempDir.ts';

// serve's audit settings (docs/operations.md#configuration): the key read and checked at start,
// the schedule's defaults, and a witness without a key refused rather than silently idle.

const dir = tempDir({ after }, 'converge-audit-settings-');
const ed = join(dir, 'audit.key');
writeFileSync(ed, generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }));
const ec = join(dir, 'ec.key');
writeFileSync(ec, generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }));

const problem = (flags: Record<string, string>, env: Record<string, string> = {}): string => {
  try {
    loadConfig({ flags, env });
  } catch (e) {
    assert.ok(isConvergeError(e, 'CONVERGE_ERR_CONFIG_INVALID'));
    return e.message;
  }
  return 'accepted';
};

test('--audit-key reads an Ed25519 key; the schedule defaults to 10,000 events or 60 s; the variables work too', () => {
  const c = loadConfig({ flags: { 'audit-key': ed, 'witness-dir': dir }, env: { CONVERGE_WITNESS_URL: 'http://127.0.0.1:9/cp' } });
  assert.equal(c.auditKey?.asymmetricKeyType, 'ed25519');
  assert.deepEqual(
    [c.checkpointEveryEvents, c.checkpointEveryMs, c.witnessDir, c.witnessUrl],
    [10_000, 60_000, dir, 'http://127.0.0.1:9/cp'],
  );
  const e = loadConfig({ flags: {}, env: { CONVERGE_AUDIT_KEY: ed, CONVERGE_CHECKPOINT_EVERY_EVENTS: '500' } });
  assert.deepEqual([e.auditKey !== null, e.checkpointEveryEvents], [true, 500]);
  assert.equal(loadConfig({ flags: {}, env: {} }).auditKey, null);
});

test('a witness without --audit-key, a key that is not Ed25519, a missing file and a bad URL are refused, each named', () => {
  assert.match(problem({ 'witness-dir': dir }), /--witness-dir \/ CONVERGE_WITNESS_DIR: needs --audit-key/);
  assert.match(problem({}, { CONVERGE_WITNESS_URL: 'http://x/' }), /--witness-url \/ CONVERGE_WITNESS_URL: needs --audit-key/);
  assert.match(problem({ 'audit-key': ec }), /--audit-key \/ CONVERGE_AUDIT_KEY: .* is a ec key, not an Ed25519 private key/);
  assert.match(problem({ 'audit-key': join(dir, 'nope') }), /--audit-key .*file not found/);
  assert.match(problem({ 'audit-key': ed, 'witness-url': 'ftp://x' }), /--witness-url .*must be an http/);
});
