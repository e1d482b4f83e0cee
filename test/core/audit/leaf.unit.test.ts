import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { eventLeafHash, leafBytes } from '../../../src/core/audit/leaf.ts';
import type { LeafFields } from '../../../src/core/audit/leaf.ts';

const event: LeafFields = {
  position: 42n,
  stream: 'node-web-01',
  revision: 7n,
  type: 'ReportReceived',
  data: Buffer.from('{"declared":"ab"}'),
  metadata: Buffer.from('{"v":1}'),
};

test('the leaf bytes are laid out field by field, each length before its bytes', () => {
  assert.equal(
    leafBytes({ position: 1n, stream: 'ab', revision: 2n, type: 'c', data: Buffer.from([0xff]), metadata: Buffer.from('m') }).toString(
      'hex',
    ),
    [
      '02', // format version
      '0000000000000001', // position
      '00000002',
      '6162', // stream
      '0000000000000002', // revision
      '00000001',
      '63', // type
      '00000001',
      'ff', // data
      '00000001',
      '6d', // metadata
    ].join(''),
  );
});

test('changing any one field changes the leaf hash', () => {
  const base = eventLeafHash(event);
  const changed: LeafFields[] = [
    { ...event, position: 43n },
    { ...event, stream: 'node-web-02' },
    { ...event, revision: 8n },
    { ...event, type: 'Alive' },
    { ...event, data: Buffer.from('{"declared":"ac"}') },
    { ...event, data: Buffer.from('{"declared":"ab"} ') },
    { ...event, metadata: Buffer.from('{"v":2}') },
  ];
  for (const c of changed)
    assert.notDeepEqual(eventLeafHash(c), base, `${c.position} ${c.stream} ${c.revision} ${c.type} ${Buffer.from(c.data).toString()}`);
});

test('moving bytes between fields gives other bytes: the encoding is unambiguous', () => {
  const a = leafBytes({ ...event, stream: 'ab', type: 'c' });
  const b = leafBytes({ ...event, stream: 'a', type: 'bc' });
  assert.notDeepEqual(a, b);
  assert.notDeepEqual(
    leafBytes({ ...event, type: 'ab', data: Buffer.from('c') }),
    leafBytes({ ...event, type: 'a', data: Buffer.from('bc') }),
  );
});

test('two different events never share leaf bytes (random fields, all moved one way or another)', () => {
  const fields = fc.record({
    position: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
    stream: fc.string({ maxLength: 12 }),
    revision: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
    type: fc.string({ maxLength: 12 }),
    data: fc.uint8Array({ maxLength: 24 }).map((d) => Buffer.from(d)),
    metadata: fc.uint8Array({ maxLength: 8 }).map((d) => Buffer.from(d)),
  });
  const same = (x: LeafFields, y: LeafFields): boolean =>
    x.position === y.position &&
    x.stream === y.stream &&
    x.revision === y.revision &&
    x.type === y.type &&
    Buffer.compare(x.data, y.data) === 0 &&
    Buffer.compare(x.metadata, y.metadata) === 0;
  fc.assert(
    fc.property(fields, fields, (x, y) => {
      fc.pre(!same(x, y));
      assert.notDeepEqual(leafBytes(x), leafBytes(y));
    }),
    { numRuns: 2_000 },
  );
});

test('the data is taken as stored, whatever view of a buffer holds it', () => {
  const backing = Buffer.from('xx{"declared":"ab"}yy');
  const view = new Uint8Array(backing.buffer, backing.byteOffset + 2, backing.length - 4);
  assert.deepEqual(leafBytes({ ...event, data: view }), leafBytes(event));
});

test('values that cannot be written exactly are refused, not wrapped or replaced', () => {
  assert.throws(() => leafBytes({ ...event, position: -1n }), RangeError);
  assert.throws(() => leafBytes({ ...event, revision: 2n ** 64n }), RangeError);
  // A lone surrogate would become U+FFFD, the same bytes as a stream that holds U+FFFD.
  assert.throws(() => leafBytes({ ...event, stream: 'a\ud800' }), RangeError);
  assert.doesNotThrow(() => leafBytes({ ...event, stream: 'a\u{1F600}' }));
});
