// What crosses to the SQLite writer thread (src/store/sqlite/sqliteWriter.ts: packWrites) comes back
// whole, through the structured clone that carries it: any streams, ids, types, data and metadata,
// empty or not, in any script, with every kind of expected revision.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { packWrites, unpackWrites } from '../../src/store/sqlite/sqliteWriter.ts';
import type { EncodedWrite } from '../../src/store/appendRules.ts';

const text = fc.string({ unit: 'grapheme', maxLength: 40 });
const expected = fc.oneof(
  fc.constantFrom('any' as const, 'no_stream' as const, 'stream_exists' as const),
  fc.bigInt({ min: -1n, max: 2n ** 62n }),
);
const writes: fc.Arbitrary<EncodedWrite[]> = fc.array(
  fc.record(
    {
      stream: text,
      expected,
      events: fc.array(fc.record({ id: text, type: text, data: text, metadata: text }, { noNullPrototype: true }), { maxLength: 6 }),
    },
    { noNullPrototype: true },
  ),
  { maxLength: 8 },
);

test('unpackWrites(packWrites(w)) is w, for any writes', () => {
  fc.assert(
    fc.property(writes, (w) => {
      assert.deepEqual(unpackWrites(structuredClone(packWrites(w))), w);
    }),
    { numRuns: 500 },
  );
});
