import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { test } from 'node:test';
import { checkpointBytes, keyIdOf, signCheckpoint, verifyCheckpoint } from '../../../src/core/audit/checkpoint.ts';
import type { SignedCheckpoint } from '../../../src/core/audit/checkpoint.ts';
import { EMPTY_ROOT, merkleRoot } from '../../../src/core/audit/merkle.ts';
import { keyIdOf as declarationKeyIdOf } from '../../../src/core/declaration/index.ts';

const audit = generateKeyPairSync('ed25519');
const other = generateKeyPairSync('ed25519');
const head = {
  size: 3,
  root: merkleRoot([Buffer.from('a'), Buffer.from('b'), Buffer.from('c')]).toString('hex'),
  at: '2025-01-02T03:04:05.678Z',
};

const tampered = (s: SignedCheckpoint, change: Partial<SignedCheckpoint['checkpoint']>): SignedCheckpoint => ({
  ...s,
  checkpoint: { ...s.checkpoint, ...change },
});

test('a checkpoint signed with the audit key verifies with its public key', () => {
  const signed = signCheckpoint(head, audit.privateKey);
  assert.deepEqual(signed.checkpoint, { ...head, keyId: keyIdOf(audit.publicKey) });
  assert.ok(verifyCheckpoint(signed, audit.publicKey));
  assert.ok(
    verifyCheckpoint(signCheckpoint({ size: 0, root: EMPTY_ROOT.toString('hex'), at: head.at }, audit.privateKey), audit.publicKey),
  );
});

test('a changed size, root, time or key id, or another key, fails', () => {
  const signed = signCheckpoint(head, audit.privateKey);
  assert.ok(!verifyCheckpoint(tampered(signed, { size: 2 }), audit.publicKey), 'size');
  assert.ok(!verifyCheckpoint(tampered(signed, { root: EMPTY_ROOT.toString('hex') }), audit.publicKey), 'root');
  assert.ok(!verifyCheckpoint(tampered(signed, { at: '2025-01-02T03:04:05.679Z' }), audit.publicKey), 'at');
  assert.ok(!verifyCheckpoint(tampered(signed, { keyId: keyIdOf(other.publicKey) }), audit.publicKey), 'key id');
  assert.ok(!verifyCheckpoint(signed, other.publicKey), 'another key');
  // Another key's signature over the same head, relabelled with the audit key's id.
  const forged = signCheckpoint(head, other.privateKey);
  assert.ok(!verifyCheckpoint({ ...forged, checkpoint: signed.checkpoint }, audit.publicKey), 'a signature by another key');
});

test('a checkpoint has one spelling: other spellings of its fields are neither signed nor verified', () => {
  const signed = signCheckpoint(head, audit.privateKey);
  for (const at of ['2025-01-02T03:04:05.678+00:00', '2025-01-02T03:04:05.678', '2025-02-30T00:00:00.000Z']) {
    assert.throws(() => signCheckpoint({ ...head, at }, audit.privateKey), RangeError, at);
    assert.ok(!verifyCheckpoint(tampered(signed, { at }), audit.publicKey), at);
  }
  assert.throws(() => signCheckpoint({ ...head, root: head.root.toUpperCase() }, audit.privateKey), RangeError);
  assert.throws(() => signCheckpoint({ ...head, size: 1.5 }, audit.privateKey), RangeError);
  assert.ok(
    !verifyCheckpoint({ ...signed, signature: `${signed.signature} ` }, audit.publicKey),
    'a signature that is not canonical base64',
  );
  assert.ok(!verifyCheckpoint({ ...signed, signature: '' }, audit.publicKey));
});

test('the signed bytes are a few lines a person can read', () => {
  const signed = signCheckpoint(head, audit.privateKey);
  assert.equal(
    checkpointBytes(signed.checkpoint).toString('utf8'),
    `converge audit checkpoint v1\nkey ${signed.checkpoint.keyId}\nsize 3\nroot ${head.root}\nat ${head.at}\n`,
  );
});

test('the key id is the one declaration keys use: sha256 of the raw public key, first 16 hex', () => {
  assert.match(keyIdOf(audit.publicKey), /^[0-9a-f]{16}$/);
  assert.equal(keyIdOf(audit.publicKey), declarationKeyIdOf(audit.publicKey));
  assert.notEqual(keyIdOf(audit.publicKey), keyIdOf(other.publicKey));
});

test('a key that is not Ed25519 is refused', () => {
  const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  assert.throws(() => signCheckpoint(head, ec.privateKey), RangeError);
  assert.ok(!verifyCheckpoint(signCheckpoint(head, audit.privateKey), ec.publicKey));
});
