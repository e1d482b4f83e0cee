import fc from 'fast-check';
import type { ErrorCode } from '../../../src/core/errors.ts';
import { defaultWireLimits, encodeAlive, encodeReport } from '../../../src/core/wire/index.ts';
import type { Report, WireLimits } from '../../../src/core/wire/index.ts';

// Bodies a hostile or broken node could put on the wire, as fast-check arbitraries, for the wire
// parser's property tests and the broker fault scenarios. Each says whether it is hostile *by
// construction* (no reading of wire.go accepts it: `mustReject`) and, where certain, the codes a
// rejection may carry. The others (random mutations, invalid UTF-8 inside a string, which Go
// also replaces with U+FFFD) only have to be refused cleanly or accepted sanely.
//
// fast-check is a devDependency: this module is test tooling, imported by test/ and the fault
// report only, never by the engine.

export const hostileKinds = [
  'randomBytes',
  'mutated',
  'truncatedJson',
  'hugeArray',
  'wideCollection',
  'deepNesting',
  'wrongType',
  'nodeMissing',
  'nonHexDigest',
  'oversize',
  'nulByte',
  'invalidUtf8Outside',
  'invalidUtf8InString',
  'prototypeKeys',
] as const;
export type HostileKind = (typeof hostileKinds)[number];
export type WireMessage = 'report' | 'alive';

export type HostileBody = Readonly<{
  kind: HostileKind;
  message: WireMessage;
  body: Buffer;
  mustReject: boolean;
  /** When set, a rejection must carry one of these codes. */
  codes?: readonly ErrorCode[];
  /** One line for a person reading a failure. */
  note: string;
}>;

const json = (v: unknown): string => JSON.stringify(v);

/** Node ids as real nodes have them (docs/operations.md, "Node accounts"). */
export const nodeIdArb = fc.stringMatching(/^[a-z0-9][a-z0-9._-]{0,20}$/);
const hex64 = fc.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => Buffer.from(b).toString('hex'));

/** Reports as a correct Go node writes them. */
export const validReportArb: fc.Arbitrary<Report> = fc.record({
  node: nodeIdArb,
  applied: fc.array(fc.string({ maxLength: 12 }), { maxLength: 5 }),
  failed: fc.dictionary(fc.string({ minLength: 1, maxLength: 8 }), fc.string({ maxLength: 20 }), { maxKeys: 3 }),
  refused: fc.oneof(fc.constant(''), fc.string({ maxLength: 20 })),
  carried: fc.array(fc.integer({ min: 1, max: 65535 }), { maxLength: 4 }),
  declared: fc.option(hex64, { nil: null }),
});

const validBody = (message: WireMessage): fc.Arbitrary<Buffer> =>
  message === 'report' ? validReportArb.map(encodeReport) : nodeIdArb.map((node) => encodeAlive({ node }));

const schemaCodes: readonly ErrorCode[] = ['CONVERGE_ERR_WIRE_SCHEMA'];
const notJson: readonly ErrorCode[] = ['CONVERGE_ERR_WIRE_NOT_JSON'];

function randomBytes(message: WireMessage): fc.Arbitrary<HostileBody> {
  // The first byte is neither `{` nor JSON whitespace, so the body cannot be a JSON object:
  // rejected by construction, whatever follows (a leading BOM is refused too, as Go refuses it).
  const first = fc.integer({ min: 0, max: 255 }).filter((b) => ![0x7b, 0x20, 0x09, 0x0a, 0x0d].includes(b));
  return fc.tuple(first, fc.uint8Array({ maxLength: 512 })).map(([b, rest]) => ({
    kind: 'randomBytes',
    message,
    body: Buffer.concat([Buffer.of(b), Buffer.from(rest)]),
    mustReject: true,
    codes: ['CONVERGE_ERR_WIRE_NOT_JSON', 'CONVERGE_ERR_WIRE_SCHEMA', 'CONVERGE_ERR_WIRE_TOO_DEEP'],
    note: `random bytes starting 0x${b.toString(16)}`,
  }));
}

function mutated(message: WireMessage): fc.Arbitrary<HostileBody> {
  return fc
    .tuple(validBody(message), fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 6 }))
    .map(([body, flips]) => {
      const b = Buffer.from(body);
      for (const [at, v] of flips) b[at % b.length] = v;
      return { kind: 'mutated', message, body: b, mustReject: false, note: `${flips.length} byte(s) overwritten` };
    });
}

function truncated(message: WireMessage): fc.Arbitrary<HostileBody> {
  // A JSON object missing its last byte (`}`) or more is never valid JSON.
  return fc.tuple(validBody(message), fc.nat()).map(([body, n]) => {
    const cut = n % body.length;
    return {
      kind: 'truncatedJson',
      message,
      body: body.subarray(0, cut),
      mustReject: true,
      codes: notJson,
      note: `cut at ${cut} of ${body.length}`,
    };
  });
}

function hugeArray(message: WireMessage, limits: WireLimits): fc.Arbitrary<HostileBody> {
  return fc.tuple(nodeIdArb, fc.constantFrom('"r"', '0', '{}', '[]', 'null')).map(([node, item]) => {
    const count = Math.ceil(limits.maxBytes / (item.length + 1)) + 1;
    const field = message === 'report' ? 'applied' : 'x';
    const body = Buffer.from(`{"node":${json(node)},"${field}":[${Array(count).fill(item).join(',')}]}`);
    return { kind: 'hugeArray', message, body, mustReject: true, codes: ['CONVERGE_ERR_WIRE_TOO_LARGE'], note: `${count} × ${item}` };
  });
}

/** Inside the size limit, but one collection holds more entries than any declaration has resources. */
function wideCollection(message: WireMessage, limits: WireLimits): fc.Arbitrary<HostileBody> {
  const fields = message === 'report' ? (['applied', 'failed', 'carried', 'x'] as const) : (['x'] as const);
  return fc.tuple(nodeIdArb, fc.constantFrom(...fields), fc.integer({ min: 1, max: 50 })).map(([node, field, over]) => {
    const n = limits.maxEntries + over;
    const items = Array.from({ length: n }, (_, i) =>
      field === 'failed' ? `"k${i.toString(36)}":"e"` : field === 'carried' ? String(1 + (i % 65535)) : `"${i.toString(36)}"`,
    );
    const value = field === 'failed' ? `{${items.join(',')}}` : `[${items.join(',')}]`;
    return {
      kind: 'wideCollection' as const,
      message,
      body: Buffer.from(`{"node":${json(node)},"${field}":${value}}`),
      mustReject: true,
      codes: ['CONVERGE_ERR_WIRE_TOO_MANY_ENTRIES', 'CONVERGE_ERR_WIRE_TOO_LARGE'] as const,
      note: `${field} of ${n} entries`,
    };
  });
}

function deepNesting(message: WireMessage, limits: WireLimits): fc.Arbitrary<HostileBody> {
  return fc
    .tuple(
      nodeIdArb,
      fc.integer({ min: 0, max: 64 }),
      fc.array(fc.boolean(), { minLength: limits.maxDepth, maxLength: limits.maxDepth }),
      fc.boolean(),
    )
    .map(([node, extra, shape, balanced]) => {
      const kinds = [...shape, ...Array<boolean>(extra).fill(true)];
      const open = kinds.map((k) => (k ? '[' : '{"a":')).join('');
      const close = balanced
        ? [...kinds]
            .reverse()
            .map((k) => (k ? ']' : '}'))
            .join('')
        : '';
      // Inside the body object (depth 1), so the total depth exceeds maxDepth by construction.
      const body = Buffer.from(`{"node":${json(node)},"x":${open}0${close}}`);
      return {
        kind: 'deepNesting',
        message,
        body,
        mustReject: true,
        codes: ['CONVERGE_ERR_WIRE_TOO_DEEP', 'CONVERGE_ERR_WIRE_TOO_LARGE'],
        note: `${kinds.length + 1} levels${balanced ? '' : ', unclosed'}`,
      };
    });
}

// Raw JSON text, so values JavaScript cannot hold exactly (2^53 + 1, 1e400) reach the parser as sent.
const wrongForString = fc.constantFrom('1', '0', '-1.5', 'true', 'false', '[]', '["a"]', '{}', '{"a":"b"}');
const wrongForArrayOfString = fc.constantFrom('"a"', '""', '1', 'true', '{}', '{"a":"b"}', '[1]', '["a",2]', '[null]', '[[]]', '[{}]');
const wrongForRecord = fc.constantFrom('"a"', '1', 'true', '[]', '["x"]', '{"a":1}', '{"a":null}', '{"a":["x"]}', '{"a":{}}');
const wrongForInts = fc.constantFrom(
  '"80"',
  '80',
  'true',
  '{}',
  '[80.5]',
  '["80"]',
  '[true]',
  '[null]',
  '[{}]',
  '[9007199254740993]',
  '[1e400]',
  '[-0.0001]',
);

function wrongType(message: WireMessage): fc.Arbitrary<HostileBody> {
  const fields: fc.Arbitrary<[string, string]>[] =
    message === 'report'
      ? [
          fc.tuple(fc.constant('node'), wrongForString),
          fc.tuple(fc.constant('applied'), wrongForArrayOfString),
          fc.tuple(fc.constant('failed'), wrongForRecord),
          fc.tuple(fc.constant('refused'), wrongForString),
          fc.tuple(fc.constant('carried'), wrongForInts),
          fc.tuple(fc.constant('declared'), wrongForString),
        ]
      : [fc.tuple(fc.constant('node'), wrongForString)];
  return fc.tuple(nodeIdArb, fc.oneof(...fields)).map(([node, [field, v]]) => {
    const body = field === 'node' ? `{"node":${v}}` : `{"node":${json(node)},"${field}":${v}}`;
    return { kind: 'wrongType', message, body: Buffer.from(body), mustReject: true, codes: schemaCodes, note: `${field}: ${v}` };
  });
}

function nodeMissing(message: WireMessage): fc.Arbitrary<HostileBody> {
  return fc
    .constantFrom('{}', '{"node":null}', '{"node":""}', '{"Node":"a"}', '{"NODE":"a"}', '{"nodes":"a"}', '{"applied":["x"]}')
    .map((b) => ({
      kind: 'nodeMissing',
      message,
      body: Buffer.from(b),
      mustReject: true,
      codes: ['CONVERGE_ERR_WIRE_NODE_MISSING'],
      note: b,
    }));
}

function nonHexDigest(): fc.Arbitrary<HostileBody> {
  const hexChars = '0123456789abcdef'.split('');
  const bad = fc.constantFrom(...'ABCDEFghijklmnopqrstuvwxyz-_ +/=.\u00e9\u0000\u2028\ud83d'.split(''));
  const sixtyFour = fc
    .tuple(fc.array(fc.constantFrom(...hexChars), { minLength: 63, maxLength: 63 }), bad, fc.nat(63))
    .map(([hex, b, at]) => [...hex.slice(0, at), b, ...hex.slice(at)].join(''));
  const wrongLength = fc
    .oneof(fc.integer({ min: 1, max: 63 }), fc.integer({ min: 65, max: 200 }))
    .chain((n) => fc.array(fc.constantFrom(...hexChars), { minLength: n, maxLength: n }).map((a) => a.join('')));
  return fc.tuple(nodeIdArb, fc.oneof(sixtyFour, wrongLength)).map(([node, declared]) => ({
    kind: 'nonHexDigest',
    message: 'report',
    body: Buffer.from(`{"node":${json(node)},"declared":${json(declared)}}`),
    mustReject: true,
    codes: ['CONVERGE_ERR_WIRE_DIGEST'],
    note: `declared ${json(declared.slice(0, 16))}… (${declared.length} chars)`,
  }));
}

function oversize(message: WireMessage, limits: WireLimits): fc.Arbitrary<HostileBody> {
  return fc.tuple(validBody(message), fc.integer({ min: 1, max: 4096 })).map(([body, extra]) => {
    // Whitespace padding: a valid body in every other respect, only too large.
    const pad = Buffer.alloc(Math.max(0, limits.maxBytes - body.length) + extra, 0x20);
    return {
      kind: 'oversize',
      message,
      body: Buffer.concat([body, pad]),
      mustReject: true,
      codes: ['CONVERGE_ERR_WIRE_TOO_LARGE'],
      note: `${body.length + pad.length} bytes`,
    };
  });
}

function nulByte(message: WireMessage): fc.Arbitrary<HostileBody> {
  // A raw NUL is neither JSON whitespace nor allowed unescaped inside a string: invalid anywhere.
  return fc.tuple(validBody(message), fc.nat()).map(([body, n]) => {
    const at = n % (body.length + 1);
    return {
      kind: 'nulByte',
      message,
      body: Buffer.concat([body.subarray(0, at), Buffer.of(0), body.subarray(at)]),
      mustReject: true,
      codes: notJson,
      note: `NUL at ${at}`,
    };
  });
}

const invalidUtf8 = fc.constantFrom(
  Buffer.of(0xff),
  Buffer.of(0xc0, 0xaf),
  Buffer.of(0xed, 0xa0, 0x80),
  Buffer.of(0x80),
  Buffer.of(0xe2, 0x82),
  Buffer.of(0xf8, 0x88, 0x80, 0x80, 0x80),
);

function invalidUtf8Outside(message: WireMessage): fc.Arbitrary<HostileBody> {
  // At the start, right after `{`, or at the end: between tokens, never inside a string.
  return fc.tuple(validBody(message), invalidUtf8, fc.constantFrom('start', 'afterBrace', 'end')).map(([body, bad, where]) => {
    const at = where === 'start' ? 0 : where === 'afterBrace' ? 1 : body.length;
    return {
      kind: 'invalidUtf8Outside',
      message,
      body: Buffer.concat([body.subarray(0, at), bad, body.subarray(at)]),
      mustReject: true,
      codes: notJson,
      note: `${bad.toString('hex')} at ${where}`,
    };
  });
}

function invalidUtf8InString(message: WireMessage): fc.Arbitrary<HostileBody> {
  return fc.tuple(nodeIdArb, invalidUtf8).map(([node, bad]) => {
    const field = message === 'report' ? 'refused' : 'x';
    const body = Buffer.concat([Buffer.from(`{"node":${json(node)},"${field}":"a`), bad, Buffer.from('b"}')]);
    return {
      kind: 'invalidUtf8InString',
      message,
      body,
      mustReject: false,
      note: `${bad.toString('hex')} inside a string (Go replaces it with U+FFFD)`,
    };
  });
}

function prototypeKeys(message: WireMessage): fc.Arbitrary<HostileBody> {
  return fc.tuple(nodeIdArb, fc.constantFrom('__proto__', 'constructor', 'prototype', 'hasOwnProperty', 'toString')).map(([node, key]) => ({
    kind: 'prototypeKeys',
    message,
    body: Buffer.from(
      `{"node":${json(node)},"${key}":{"polluted":true,"prototype":{"polluted":true}}${message === 'report' ? `,"failed":{"${key}":"x"}` : ''}}`,
    ),
    mustReject: false,
    note: `key ${key}`,
  }));
}

/** Hostile bodies of one kind for one message type (`nonHexDigest` is report-only). */
export function hostileBodiesOf(
  kind: HostileKind,
  message: WireMessage,
  limits: WireLimits = defaultWireLimits,
): fc.Arbitrary<HostileBody> {
  switch (kind) {
    case 'randomBytes':
      return randomBytes(message);
    case 'mutated':
      return mutated(message);
    case 'truncatedJson':
      return truncated(message);
    case 'hugeArray':
      return hugeArray(message, limits);
    case 'wideCollection':
      return wideCollection(message, limits);
    case 'deepNesting':
      return deepNesting(message, limits);
    case 'wrongType':
      return wrongType(message);
    case 'nodeMissing':
      return nodeMissing(message);
    case 'nonHexDigest':
      return nonHexDigest();
    case 'oversize':
      return oversize(message, limits);
    case 'nulByte':
      return nulByte(message);
    case 'invalidUtf8Outside':
      return invalidUtf8Outside(message);
    case 'invalidUtf8InString':
      return invalidUtf8InString(message);
    case 'prototypeKeys':
      return prototypeKeys(message);
  }
}

/** Every kind, for reports and alives, equally weighted. */
export function hostileBodies(limits: WireLimits = defaultWireLimits): fc.Arbitrary<HostileBody> {
  const arbs: fc.Arbitrary<HostileBody>[] = [];
  for (const kind of hostileKinds) {
    arbs.push(hostileBodiesOf(kind, 'report', limits));
    if (kind !== 'nonHexDigest') arbs.push(hostileBodiesOf(kind, 'alive', limits));
  }
  return fc.oneof(...arbs);
}
