import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isConvergeError } from '../../../src/core/errors.ts';
import type { ErrorCode } from '../../../src/core/errors.ts';
import { encodeReport, encodeSigned, parseAlive, parseReport, parseSigned } from '../../../src/core/wire/index.ts';
import { keysVector, vectorBytes, vectorFiles } from '../../support/vectors.ts';

const parserFor = (name: string) =>
  name.startsWith('report') ? parseReport : name === 'alive.json' ? parseAlive : name === 'signed.json' ? parseSigned : null;

test('every vector the Go encoder wrote parses as-is', () => {
  const files = vectorFiles().filter((f) => f !== 'signed.keys.json');
  assert.ok(files.length >= 8, `expected the node-side vectors, found ${files.join(', ')}`);
  for (const f of files) {
    const parse = parserFor(f);
    assert.ok(parse, `no parser for vector ${f}`);
    assert.doesNotThrow(() => parse(vectorBytes(f)), f);
  }
});

test('absent omitempty fields read as empty, and a report with no declared is legacy', () => {
  const r = parseReport(vectorBytes('report-legacy-no-declared.json'));
  assert.deepEqual(r, { node: 'edge-07', applied: ['web'], failed: {}, refused: '', carried: [], declared: null });
  assert.deepEqual(parseReport(vectorBytes('report-minimal.json')), {
    node: 'edge-07',
    applied: [],
    failed: {},
    refused: '',
    carried: [],
    declared: null,
  });
});

test('Go escapes (\\u003c, \\u0026, \\n, non-ASCII) decode to the words the node wrote', () => {
  const r = parseReport(vectorBytes('report-failed.json'));
  assert.equal(r.failed['zeta'], 'image pull failed: <timeout> & retry\nsecond line');
  assert.equal(r.failed['alpha'], 'naïve unicode ✓');
  assert.equal(r.declared, '71ae937be159c94a14cbcd40ff6247d0cf4378bf971f4718dea0d80b1f51b54d');
});

test('a report encoded the way Go encodes it is byte-identical to the vectors', () => {
  for (const f of [
    'report-applied.json',
    'report-failed.json',
    'report-refused.json',
    'report-legacy-no-declared.json',
    'report-minimal.json',
  ]) {
    assert.equal(encodeReport(parseReport(vectorBytes(f))).toString('utf8'), vectorBytes(f).toString('utf8'), f);
  }
});

test('explicit nulls read as Go reads them: empty collections, and a null node is missing', () => {
  const r = parseReport(Buffer.from('{"node":"n1","applied":null,"failed":null,"carried":null,"declared":null,"refused":null}'));
  assert.deepEqual(r, { node: 'n1', applied: [], failed: {}, refused: '', carried: [], declared: null });
  assertRejected(() => parseReport(Buffer.from('{"node":null}')), 'CONVERGE_ERR_WIRE_NODE_MISSING');
});

test('unknown fields are ignored, as Go ignores them', () => {
  const r = parseReport(Buffer.from('{"node":"n1","future":{"x":[1,2]},"applied":["a"]}'));
  assert.deepEqual(r.applied, ['a']);
  assert.ok(!('future' in r));
});

test('Signed encodes to what Go decodes back to the same bytes (padded standard base64)', () => {
  const raw = vectorBytes('signed.json');
  const signed = parseSigned(raw);
  const keys = keysVector();
  assert.equal(signed.declaration.toString('utf8'), keys.declaration_utf8);
  assert.equal(signed.signature.toString('hex'), keys.signature_hex);
  assert.equal(encodeSigned(signed).toString('utf8'), raw.toString('utf8'));
  // Byte lengths that need one and two '=' of padding survive the round trip.
  for (const n of [1, 2, 3, 4, 5]) {
    const s = { declaration: Buffer.alloc(n, 0xfb), signature: Buffer.alloc(64, n) };
    const back = parseSigned(encodeSigned(s));
    assert.ok(back.declaration.equals(s.declaration) && back.signature.equals(s.signature));
  }
});

function assertRejected(fn: () => unknown, code: ErrorCode): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(isConvergeError(e), `expected a ConvergeError, got ${String(e)}`);
    assert.equal(e.code, code, e.message);
    assert.ok(e.message.length > 10, 'the reason is readable');
    return true;
  });
}

test('hostile bodies are rejected with the right code and a reason a person can read', () => {
  const cases: [string, Buffer | string, ErrorCode][] = [
    ['truncated JSON', '{"node":"edge-07","applied":["web"', 'CONVERGE_ERR_WIRE_NOT_JSON'],
    ['not JSON at all', 'hello', 'CONVERGE_ERR_WIRE_NOT_JSON'],
    ['node of the wrong type', '{"node":1}', 'CONVERGE_ERR_WIRE_SCHEMA'],
    ['node missing', '{"applied":["web"]}', 'CONVERGE_ERR_WIRE_NODE_MISSING'],
    ['node empty', '{"node":""}', 'CONVERGE_ERR_WIRE_NODE_MISSING'],
    ['a 10 MB body', Buffer.alloc(10 * 1024 * 1024, 0x20), 'CONVERGE_ERR_WIRE_TOO_LARGE'],
    ['deep nesting', `{"node":"n","x":${'['.repeat(5000)}${']'.repeat(5000)}}`, 'CONVERGE_ERR_WIRE_TOO_DEEP'],
    ['failed given as an array', '{"node":"n","failed":["db"]}', 'CONVERGE_ERR_WIRE_SCHEMA'],
    ['applied with a number in it', '{"node":"n","applied":["a",2]}', 'CONVERGE_ERR_WIRE_SCHEMA'],
    ['carried as a float', '{"node":"n","carried":[80.5]}', 'CONVERGE_ERR_WIRE_SCHEMA'],
    ['declared in upper case', `{"node":"n","declared":"${'A'.repeat(64)}"}`, 'CONVERGE_ERR_WIRE_DIGEST'],
    ['declared 64 chars but not hex', `{"node":"n","declared":"${'g'.repeat(64)}"}`, 'CONVERGE_ERR_WIRE_DIGEST'],
    ['declared too short', '{"node":"n","declared":"abc"}', 'CONVERGE_ERR_WIRE_DIGEST'],
    ['a JSON array body', '[{"node":"n"}]', 'CONVERGE_ERR_WIRE_SCHEMA'],
    ['a JSON string body', '"n"', 'CONVERGE_ERR_WIRE_SCHEMA'],
    [
      'a leading UTF-8 byte-order mark (Go refuses it)',
      Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"node":"n"}')]),
      'CONVERGE_ERR_WIRE_NOT_JSON',
    ],
  ];
  for (const [, body, code] of cases) assertRejected(() => parseReport(Buffer.from(body)), code);
  assertRejected(() => parseAlive(Buffer.from('{"node":1}')), 'CONVERGE_ERR_WIRE_SCHEMA');
  assertRejected(() => parseAlive(Buffer.from('{}')), 'CONVERGE_ERR_WIRE_NODE_MISSING');
  assertRejected(() => parseSigned(Buffer.from('{"declaration":"not base64!","signature":""}')), 'CONVERGE_ERR_WIRE_BASE64');
  assertRejected(() => parseSigned(Buffer.from('{"declaration":"YWJj","signature":"YQ"}')), 'CONVERGE_ERR_WIRE_BASE64');
});

test('the size limit is configurable and checked before parsing', () => {
  const body = Buffer.from(`{"node":"n","applied":[${Array.from({ length: 200 }, (_, i) => `"r${i}"`).join(',')}]}`);
  assert.doesNotThrow(() => parseReport(body));
  assertRejected(() => parseReport(body, { maxBytes: 100, maxDepth: 32 }), 'CONVERGE_ERR_WIRE_TOO_LARGE');
});

test('brackets inside strings do not count as nesting', () => {
  const r = parseReport(Buffer.from(`{"node":"n","failed":{"x":"${'[{'.repeat(100)}\\" ]"}}`));
  assert.equal(r.failed['x']?.length, 203);
});

// One valid node stalled the fleet with ~262 KB reports holding ~22,000 `failed`
// keys each. A collection is bounded by the 10,000 resources a declaration may hold, and a body
// past that is refused by a scan of its bytes, before JSON.parse builds anything.
const wide = (field: 'applied' | 'failed' | 'carried', n: number): Buffer => {
  if (field === 'failed')
    return Buffer.from(`{"node":"n","failed":{${Array.from({ length: n }, (_, i) => `"k${i.toString(36)}":"e"`).join(',')}}}`);
  const item = field === 'applied' ? (i: number) => `"r${i}"` : (i: number) => String(1 + (i % 65535));
  return Buffer.from(`{"node":"n","${field}":[${Array.from({ length: n }, (_, i) => item(i)).join(',')}]}`);
};

test('applied, failed and carried hold at most 10,000 entries; one more is refused with its own code', () => {
  for (const field of ['applied', 'failed', 'carried'] as const) {
    const r = parseReport(wide(field, 10_000));
    assert.equal(field === 'failed' ? Object.keys(r.failed).length : r[field].length, 10_000, field);
    assertRejected(() => parseReport(wide(field, 10_001)), 'CONVERGE_ERR_WIRE_TOO_MANY_ENTRIES');
  }
  // The body: ~262 KB, inside the 256 KiB limit's neighbourhood, 22,000 short keys.
  assertRejected(() => parseReport(wide('failed', 22_000)), 'CONVERGE_ERR_WIRE_TOO_MANY_ENTRIES');
  // Counted outside strings only, and the limit is configurable.
  assert.doesNotThrow(() => parseReport(Buffer.from(`{"node":"n","refused":"${','.repeat(20_000)}"}`)));
  assertRejected(
    () => parseReport(wide('applied', 11), { maxBytes: 1024, maxDepth: 32, maxEntries: 10 }),
    'CONVERGE_ERR_WIRE_TOO_MANY_ENTRIES',
  );
});

test('carried ports are TCP/UDP ports, 1 to 65535', () => {
  assert.deepEqual(parseReport(Buffer.from('{"node":"n","carried":[1,8080,65535]}')).carried, [1, 8080, 65535]);
  for (const bad of [-5, 0, 65536, 1e9]) {
    assertRejected(() => parseReport(Buffer.from(`{"node":"n","carried":[80,${bad}]}`)), 'CONVERGE_ERR_WIRE_SCHEMA');
  }
});

test('a failed resource named __proto__ is kept as the node sent it, beside the others', () => {
  const body = Buffer.from('{"node":"n","failed":{"__proto__":"pull denied","web":"port busy"}}');
  const r = parseReport(body);
  assert.deepEqual(Object.entries(r.failed), [
    ['__proto__', 'pull denied'],
    ['web', 'port busy'],
  ]);
  assert.equal(Object.getPrototypeOf(r.failed), Object.prototype, 'the key is data, not the prototype');
  assert.equal(encodeReport(r).toString('utf8'), body.toString('utf8'), 'and it encodes back to the same bytes');
});
