import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { hostileBodies, nodeIdArb, validReportArb } from '../../support/faults/hostileBodies.ts';
import { fastAlive, fastReport } from '../../../src/core/wire/parseFast.ts';
import { aliveSchema, defaultWireLimits, encodeAlive, encodeReport, reportSchema } from '../../../src/core/wire/index.ts';

// zod is the single source of truth for what a report or alive is; the fast path in front of
// it may only say "yes, and here is what zod would have returned" or "ask zod". So: whatever
// the fast path accepts, zod accepts with a deep-equal result, and the bodies real nodes send
// (Go-encoded) do take the fast path, or it would be a fast path for nothing.

const agrees = (v: unknown): void => {
  const report = fastReport(v);
  if (report !== null) {
    const z = reportSchema.safeParse(v);
    assert.ok(z.success, `fast path accepted a report zod refuses: ${JSON.stringify(v)}`);
    assert.deepStrictEqual(report, z.data);
  }
  const alive = fastAlive(v);
  if (alive !== null) {
    const z = aliveSchema.safeParse(v);
    assert.ok(z.success, `fast path accepted an alive zod refuses: ${JSON.stringify(v)}`);
    assert.deepStrictEqual(alive, z.data);
  }
};

/** Objects with the wire's field names holding anything JSON can, present or absent. */
const anyJson = fc.jsonValue({ maxDepth: 3 });
const fieldish = fc.record(
  {
    node: fc.oneof(nodeIdArb, fc.constant(null), fc.constant(''), anyJson),
    applied: fc.oneof(fc.array(fc.string({ maxLength: 6 }), { maxLength: 4 }), fc.constant(null), anyJson),
    failed: fc.oneof(
      fc.dictionary(
        fc.oneof(fc.string({ maxLength: 6 }), fc.constantFrom('__proto__', 'constructor', 'toString')),
        fc.oneof(fc.string({ maxLength: 6 }), anyJson),
        { maxKeys: 3 },
      ),
      fc.constant(null),
      anyJson,
    ),
    refused: fc.oneof(fc.string({ maxLength: 6 }), fc.constant(null), anyJson),
    carried: fc.oneof(
      fc.array(fc.oneof(fc.integer(), fc.double(), fc.constantFrom(-0, 2 ** 53, 2 ** 53 - 1, -(2 ** 53))), { maxLength: 4 }),
      fc.constant(null),
      anyJson,
    ),
    declared: fc.oneof(fc.string({ maxLength: 66 }), fc.constant(null), anyJson),
    extra: anyJson,
  },
  { requiredKeys: [] },
);

test('whatever the fast path accepts, zod accepts and returns the same: fields of every JSON type, present or absent', () => {
  fc.assert(
    fc.property(fieldish, (v) => agrees(JSON.parse(JSON.stringify(v)))),
    { numRuns: 20_000 },
  );
});

test('on any JSON value at all', () => {
  fc.assert(fc.property(anyJson, agrees), { numRuns: 5_000 });
});

test('on hostile bodies that are JSON, including prototype keys', () => {
  fc.assert(
    fc.property(hostileBodies({ ...defaultWireLimits, maxBytes: 8 * 1024 }), (h) => {
      let v: unknown;
      try {
        v = JSON.parse(h.body.toString('utf8'));
      } catch {
        return;
      }
      agrees(v);
    }),
    { numRuns: 5_000 },
  );
});

test('the reports and alives a Go node sends take the fast path', () => {
  fc.assert(
    fc.property(validReportArb, (r) => {
      const v = JSON.parse(encodeReport(r).toString('utf8')) as unknown;
      assert.notEqual(fastReport(v), null);
      agrees(v);
    }),
    { numRuns: 5_000 },
  );
  fc.assert(fc.property(nodeIdArb, (node) => assert.notEqual(fastAlive(JSON.parse(encodeAlive({ node }).toString('utf8'))), null)));
});
