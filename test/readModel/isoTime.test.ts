import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { createIsoParser } from '../../src/readModel/isoTime.ts';

test('the remembering ISO parser answers as Date.parse over any sequence of texts, repeats and bad ones included', () => {
  const texts = fc.oneof(
    fc.date({ min: new Date(0), max: new Date('2100-01-01'), noInvalidDate: true }).map((d) => d.toISOString()),
    fc.constantFrom('2024-01-01T00:00:00.000Z', 'not a time', ''),
  );
  fc.assert(
    fc.property(fc.array(texts, { maxLength: 40 }), (xs) => {
      const parse = createIsoParser();
      for (const x of xs) assert.deepEqual(parse(x), Date.parse(x), x);
    }),
  );
});
