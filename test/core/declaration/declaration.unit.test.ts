import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  buildDeclaration,
  checkCarriedPorts,
  digestOf,
  generateSigningKey,
  publicKeyToPem,
  rawPublicKey,
  readDeclaration,
  signDeclaration,
  signingKeyFromPem,
  signingKeyFromSeed,
  signingKeyToPem,
  validateSpec,
  verifyDeclaration,
  verifyingKeyFromPem,
  verifyingKeyFromRaw,
} from '../../../src/core/declaration/index.ts';
import { isConvergeError } from '../../../src/core/errors.ts';
import { parseSigned } from '../../../src/core/wire/index.ts';
import { keysVector, vectorBytes } from '../../support/vectors.ts';

test('the cross-language vector is reproduced exactly: same seed, public key, digest and signature', () => {
  const v = keysVector();
  const key = signingKeyFromSeed(Buffer.from(v.ed25519_seed_hex, 'hex'));
  const bytes = Buffer.from(v.declaration_utf8, 'utf8');
  assert.equal(rawPublicKey(key.publicKey).toString('hex'), v.ed25519_public_key_hex);
  assert.equal(digestOf(bytes), v.declaration_sha256_hex);
  assert.equal(signDeclaration(bytes, key).toString('hex'), v.signature_hex);
});

test('a signature is checked over the bytes as received, which need not be canonical JSON', () => {
  const v = keysVector();
  const signed = parseSigned(vectorBytes('signed.json'));
  const verifying = verifyingKeyFromRaw(Buffer.from(v.ed25519_public_key_hex, 'hex'));
  assert.ok(verifyDeclaration(signed.declaration, signed.signature, verifying));
  // The vector's bytes have "serial" first and a space: re-encoding them changes the bytes, and the signature no longer holds.
  const reencoded = Buffer.from(JSON.stringify(readDeclaration(signed.declaration)));
  assert.notDeepEqual(reencoded, signed.declaration);
  assert.equal(verifyDeclaration(reencoded, signed.signature, verifying), false);
  assert.equal(readDeclaration(signed.declaration).serial, 42);
});

test('a flipped bit in the bytes or the signature, or another key, fails verification', () => {
  const v = keysVector();
  const signed = parseSigned(vectorBytes('signed.json'));
  const verifying = verifyingKeyFromRaw(Buffer.from(v.ed25519_public_key_hex, 'hex'));
  for (const i of [0, 17, signed.declaration.length - 1]) {
    const b = Buffer.from(signed.declaration);
    b[i] = b[i]! ^ 0x01;
    assert.equal(verifyDeclaration(b, signed.signature, verifying), false);
  }
  const s = Buffer.from(signed.signature);
  s[10] = s[10]! ^ 0x80;
  assert.equal(verifyDeclaration(signed.declaration, s, verifying), false);
  assert.equal(verifyDeclaration(signed.declaration, signed.signature.subarray(0, 63), verifying), false);
  assert.equal(verifyDeclaration(signed.declaration, signed.signature, generateSigningKey()), false);
});

test('keys round-trip through PEM with a stable key id', () => {
  const k = generateSigningKey();
  const back = signingKeyFromPem(signingKeyToPem(k));
  assert.equal(back.keyId, k.keyId);
  assert.match(k.keyId, /^[0-9a-f]{16}$/);
  assert.equal(verifyingKeyFromPem(publicKeyToPem(k)).keyId, k.keyId);
  assert.throws(
    () => signingKeyFromPem('not a key'),
    (e) => isConvergeError(e, 'CONVERGE_ERR_KEY_INVALID'),
  );
});

test('declaration bytes carry node, serial, issued and resources, and each serial gives a new digest', () => {
  const resources = [{ id: 'web', ports: [8080], image: 'nginx:1.27' }];
  const a1 = buildDeclaration({ node: 'n1', serial: 1, issued: new Date('2026-11-29T12:00:00.123Z'), resources });
  const a3 = buildDeclaration({ node: 'n1', serial: 3, issued: new Date('2026-11-29T12:00:00.123Z'), resources });
  assert.notEqual(digestOf(a1), digestOf(a3));
  assert.match(digestOf(a1), /^[0-9a-f]{64}$/);
  const d = readDeclaration(a1);
  assert.deepEqual({ node: d.node, serial: d.serial, issued: d.issued }, { node: 'n1', serial: 1, issued: '2026-11-29T12:00:00Z' });
  assert.deepEqual(d.resources, resources, 'everything else in a resource is kept as given');
  assert.ok(a1.toString('utf8').startsWith('{"node":"n1","serial":1,"issued":"2026-11-29T12:00:00Z","resources":['));
});

test('a spec with duplicate resource ids, non-string ids or bad ports is refused with a clear code', () => {
  const refused = (spec: unknown, code: string) =>
    assert.throws(
      () => validateSpec(spec),
      (e) => isConvergeError(e) && e.code === code && e.message.length > 20,
    );
  refused({ resources: [{ id: 'web' }, { id: 'web' }] }, 'CONVERGE_ERR_SPEC_DUPLICATE_ID');
  refused({ resources: [{ id: 7 }] }, 'CONVERGE_ERR_SPEC_INVALID');
  refused({ resources: [{ name: 'no id' }] }, 'CONVERGE_ERR_SPEC_INVALID');
  refused({ resources: [{ id: 'web', ports: [70000] }] }, 'CONVERGE_ERR_SPEC_INVALID');
  refused({ resources: 'web' }, 'CONVERGE_ERR_SPEC_INVALID');
  assert.throws(
    () => buildDeclaration({ node: 'n', serial: 1, issued: new Date(), resources: [{ id: 'a' }, { id: 'a' }] }),
    (e) => isConvergeError(e, 'CONVERGE_ERR_SPEC_DUPLICATE_ID'),
  );
  assert.deepEqual(validateSpec({ resources: [] }).resources, []);
});

test('assigning a port the node carries is refused, naming the port and the resource', () => {
  const spec = validateSpec({
    resources: [
      { id: 'web', ports: [8080] },
      { id: 'queue', ports: [5672] },
    ],
  });
  assert.doesNotThrow(() => checkCarriedPorts(spec, [4222]));
  assert.throws(
    () => checkCarriedPorts(spec, [4222, 5672]),
    (e) => isConvergeError(e, 'CONVERGE_ERR_PORT_CARRIED') && /5672/.test(e.message) && /queue/.test(e.message),
  );
});

test('validateSpec refuses a field it does not know at the top level, naming it, as kubectl --validate=strict does', () => {
  assert.throws(
    () => validateSpec({ resources: [{ id: 'web' }], resource: [] }),
    (e: unknown) => isConvergeError(e, 'CONVERGE_ERR_SPEC_INVALID') && /resource/.test((e as Error).message),
  );
  // A resource's other fields are the node's (docs/declarations.md): kept, never refused.
  assert.deepEqual(validateSpec({ resources: [{ id: 'web', port: 80 }] }).resources, [{ id: 'web', port: 80 }]);
});
