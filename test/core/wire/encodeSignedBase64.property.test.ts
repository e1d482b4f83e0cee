// The relay writes a stored declaration's message from its base64 texts as they are
// (src/core/wire/parse.ts: encodeSignedBase64) where it used to decode them and encode them again:
// the bytes must be the same for any texts, canonical or not (whitespace, the URL alphabet, no
// padding, stray bits, junk), or a node would be sent other bytes than the signature covers.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { encodeSigned, encodeSignedBase64 } from '../../../src/core/wire/index.ts';

const decodedThenEncoded = (declaration: string, signature: string): Buffer =>
  encodeSigned({ declaration: Buffer.from(declaration, 'base64'), signature: Buffer.from(signature, 'base64') });

const canonical = fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b).toString('base64'));
const alphabet = [...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_ \n.é'];
const base64ish = fc.array(fc.constantFrom(...alphabet), { maxLength: 40 }).map((cs) => cs.join(''));
// A canonical text with its last character or padding changed: the stray-bits cases.
const nearlyCanonical = fc
  .tuple(canonical, fc.constantFrom(...alphabet), fc.nat())
  .map(([t, c, i]) => (t.length === 0 ? c : t.slice(0, i % t.length) + c + t.slice((i % t.length) + 1)));
const text = fc.oneof(canonical, base64ish, nearlyCanonical);

test('encodeSignedBase64 writes the bytes decoding and encoding the texts again would', () => {
  fc.assert(
    fc.property(text, text, (declaration, signature) => {
      assert.deepEqual(encodeSignedBase64(declaration, signature), decodedThenEncoded(declaration, signature));
    }),
    { numRuns: 5_000 },
  );
});

test('a canonical text is taken as it is, and a stored declaration comes out byte for byte', () => {
  const declaration = Buffer.from('{"serial":1,"resources":[]}').toString('base64');
  const signature = Buffer.alloc(64, 7).toString('base64');
  assert.equal(
    encodeSignedBase64(declaration, signature).toString('latin1'),
    `{"declaration":"${declaration}","signature":"${signature}"}`,
  );
});
