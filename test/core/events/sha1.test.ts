import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import fc from 'fast-check';
import { sha1Words, uuidV5 } from '../../../src/core/events/ids.ts';

// Event ids (docs/design.md §2) hash short names with a SHA-1 written in TypeScript (src/core/events/ids.ts):
// it must be SHA-1 exactly, at every length around the block and padding boundaries, or every
// id it makes would differ from the ids already stored.

const hexOf = (h: Int32Array): string => Array.from(h, (v) => (v >>> 0).toString(16).padStart(8, '0')).join('');

test('sha1Words equals node:crypto SHA-1 for every input length from 0 to 183 bytes', () => {
  const buf = new Uint8Array(256);
  for (let n = 0; n <= 183; n++) {
    const input = Uint8Array.from({ length: n }, (_, i) => (i * 131 + n * 7) & 0xff);
    buf.fill(0xee);
    buf.set(input);
    assert.equal(hexOf(sha1Words(buf, n)), createHash('sha1').update(input).digest('hex'), `length ${n}`);
  }
});

test('sha1Words equals node:crypto SHA-1 on generated inputs, whatever the buffer held before', () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 183 }), fc.uint8Array({ minLength: 256, maxLength: 256 }), (input, junk) => {
      const buf = Uint8Array.from(junk);
      buf.set(input);
      assert.equal(hexOf(sha1Words(buf, input.length)), createHash('sha1').update(input).digest('hex'));
    }),
    { numRuns: 2_000 },
  );
});

test('uuidV5 is the RFC 4122 name-based id for names short and long, ASCII or not', () => {
  const reference = (name: string): string => {
    const ns = Buffer.from('6f1d7c2e9a4b4c8e8f3a2b5d9e0c1a47', 'hex');
    const h = createHash('sha1').update(ns).update(name, 'utf8').digest();
    h[6] = (h[6]! & 0x0f) | 0x50;
    h[8] = (h[8]! & 0x3f) | 0x80;
    const x = h.subarray(0, 16).toString('hex');
    return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
  };
  fc.assert(
    fc.property(fc.string({ unit: 'grapheme', maxLength: 120 }), (name) => assert.equal(uuidV5(name), reference(name))),
    { numRuns: 2_000 },
  );
  for (const name of ['', 'ReportReceived/n1/msg/engine-10k-0-1', 'é'.repeat(80), 'x'.repeat(167), 'x'.repeat(168), 'x'.repeat(5000)])
    assert.equal(uuidV5(name), reference(name), `length ${name.length}`);
});
