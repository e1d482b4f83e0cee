import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { errorCodes, isConvergeError } from '../../src/core/errors.ts';
import { hostileBodies, hostileBodiesOf, hostileKinds, validReportArb } from '../support/faults/hostileBodies.ts';
import type { HostileBody } from '../support/faults/hostileBodies.ts';
import { defaultWireLimits, digestPattern, encodeReport, parseAlive, parseReport } from '../../src/core/wire/index.ts';
import type { WireLimits } from '../../src/core/wire/index.ts';

// The wire parser is the edge: whatever a node sends, it either returns a well-formed
// message or throws a ConvergeError with a registered code — never anything else, and never
// accepts a body that is hostile by construction.

const small: WireLimits = { maxBytes: 8 * 1024, maxDepth: 16, maxEntries: 100 };

function check(h: HostileBody, limits: WireLimits): void {
  let parsed: unknown;
  try {
    parsed = h.message === 'report' ? parseReport(h.body, limits) : parseAlive(h.body, limits);
  } catch (e) {
    assert.ok(isConvergeError(e), `${h.kind} (${h.note}) threw a non-ConvergeError: ${String(e)}`);
    assert.ok(e.code in errorCodes, `unregistered code ${e.code}`);
    if (h.codes)
      assert.ok(h.codes.includes(e.code), `${h.kind} (${h.note}) rejected with ${e.code}, expected one of ${h.codes.join(', ')}`);
    return;
  }
  assert.equal(h.mustReject, false, `${h.kind} (${h.note}) was accepted: ${h.body.subarray(0, 120).toString('latin1')}`);
  // Accepted: it must be a sane message all the same.
  const m = parsed as { node: unknown; declared?: unknown; applied?: unknown; failed?: unknown; carried?: unknown };
  assert.ok(typeof m.node === 'string' && m.node.length > 0);
  if (h.message === 'report') {
    assert.ok(m.declared === null || (typeof m.declared === 'string' && digestPattern.test(m.declared)));
    assert.ok(Array.isArray(m.applied) && m.applied.every((a) => typeof a === 'string'));
    assert.ok(Array.isArray(m.carried) && m.carried.every((c) => Number.isInteger(c) && c >= 1 && c <= 65535));
    assert.ok(Object.values(m.failed as object).every((v) => typeof v === 'string'));
  }
  assert.equal(({} as Record<string, unknown>)['polluted'], undefined, 'Object.prototype was polluted');
  assert.equal(Object.hasOwn(m, 'polluted'), false);
}

test('thousands of hostile reports and alives: only ConvergeErrors with registered codes, and none hostile by construction accepted', () => {
  fc.assert(
    fc.property(hostileBodies(small), (h) => check(h, small)),
    { numRuns: 6000 },
  );
});

test('at the default limits too (256 KiB, depth 32)', () => {
  fc.assert(
    fc.property(hostileBodies(defaultWireLimits), (h) => check(h, defaultWireLimits)),
    { numRuns: 1500 },
  );
});

test('each kind, on its own, is refused as it should be', () => {
  for (const kind of hostileKinds) {
    for (const message of kind === 'nonHexDigest' ? (['report'] as const) : (['report', 'alive'] as const)) {
      fc.assert(
        fc.property(hostileBodiesOf(kind, message, small), (h) => check(h, small)),
        { numRuns: 200 },
      );
    }
  }
});

test('the generator produces every kind, and most of what it makes is hostile by construction', () => {
  const sample = fc.sample(hostileBodies(small), { numRuns: 3000, seed: 42 });
  assert.deepEqual(new Set(sample.map((h) => h.kind)), new Set(hostileKinds));
  assert.ok(sample.filter((h) => h.mustReject).length > sample.length / 2);
});

test('control: the valid reports the hostile ones are built from are accepted, so each rejection is the fault’s doing', () => {
  fc.assert(
    fc.property(validReportArb, (r) => {
      const back = parseReport(encodeReport(r), small);
      assert.equal(back.node, r.node);
      assert.equal(back.declared, r.declared);
    }),
    { numRuns: 1000 },
  );
});
