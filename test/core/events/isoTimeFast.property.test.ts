import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { isoMs, isoText } from '../../../src/core/events/index.ts';

// isoMs (src/core/events/isoTimeFast.ts) lets the bulk folds hold a time as a number: it must read exactly
// the texts Date#toISOString writes back unchanged, with Date.parse's value, and no other text.

const first = Date.parse('0000-01-01T00:00:00.000Z');
const last = Date.parse('9999-12-31T23:59:59.999Z');

test('every time from year 0 to 9999, as Date#toISOString writes it, is read back to its milliseconds', () => {
  fc.assert(
    fc.property(fc.integer({ min: first, max: last }), (ms) => {
      assert.equal(isoText(ms), new Date(ms).toISOString());
      assert.equal(isoMs(isoText(ms)), ms);
    }),
    { numRuns: 20_000 },
  );
});

/** Texts of the 24-character shape with any digits (days past a month's end, hour 24, …), and some shapes beside it. */
const nearIso = fc.oneof(
  fc
    .tuple(
      fc.integer({ min: 0, max: 9999 }),
      fc.integer({ min: 0, max: 19 }),
      fc.integer({ min: 0, max: 39 }),
      fc.integer({ min: 0, max: 29 }),
      fc.integer({ min: 0, max: 69 }),
      fc.integer({ min: 0, max: 69 }),
      fc.integer({ min: 0, max: 999 }),
    )
    .map(
      ([y, mo, d, h, mi, s, f]) =>
        `${String(y).padStart(4, '0')}-${String(mo).padStart(2, '0')}-${String(d).padStart(2, '0')}T${String(h).padStart(2, '0')}:${String(mi).padStart(2, '0')}:${String(s).padStart(2, '0')}.${String(f).padStart(3, '0')}Z`,
    ),
  fc.constantFrom('2026-01-01T00:00:00Z', '2026-01-01T00:00:00.000+00:00', '+002026-01-01T00:00:00.000Z', '2026-01-01 00:00:00.000Z'),
  fc.string({ minLength: 24, maxLength: 24 }),
);

test('any other text is NaN; a text it reads is one Date#toISOString writes, with the value Date.parse gives', () => {
  fc.assert(
    fc.property(nearIso, (text) => {
      const ms = isoMs(text);
      if (Number.isNaN(ms)) {
        const parsed = Date.parse(text);
        assert.ok(Number.isNaN(parsed) || isoText(parsed) !== text, `${text} is toISOString's own text, and isoMs did not read it`);
        return;
      }
      assert.equal(isoText(ms), text);
      assert.equal(Date.parse(text), ms);
    }),
    { numRuns: 20_000 },
  );
});
