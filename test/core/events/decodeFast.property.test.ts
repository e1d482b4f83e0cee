import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { isConvergeError } from '../../../src/core/errors.ts';
import {
  aliveSeenData,
  declarationSentData,
  decodeEvent,
  eventMetadata,
  nodeHeardData,
  nodeSilentData,
  reportReceivedData,
  rolloutNodesListedData,
  rolloutSentData,
} from '../../../src/core/events/index.ts';
import {
  fastAliveSeen,
  fastDeclarationSent,
  fastNodeHeard,
  fastNodeSilent,
  fastReportReceived,
  fastRolloutNodesListed,
  fastRolloutSent,
  isPlainIso,
} from '../../../src/core/events/decodeFast.ts';
import {
  makeAliveSeen,
  makeDeclarationSent,
  makeNodeHeard,
  makeNodeSilent,
  makeReportReceived,
  makeRolloutEvent,
} from '../../../src/core/events/index.ts';
import { testKey } from '../../support/history.ts';
import { parseReport } from '../../../src/core/wire/index.ts';

// zod is the one definition of a valid stored event; the fast check in front of it may only say
// "yes, and here is what zod would have returned" or "ask zod". So: whatever the fast check
// accepts, zod accepts with a deep-equal result; and the events the engine writes do take the
// fast check, or it would be a fast path for nothing.

const checks = [
  { type: 'DeclarationSent', fast: fastDeclarationSent, schema: declarationSentData },
  { type: 'ReportReceived', fast: fastReportReceived, schema: reportReceivedData },
  { type: 'AliveSeen', fast: fastAliveSeen, schema: aliveSeenData },
  { type: 'NodeHeard', fast: fastNodeHeard, schema: nodeHeardData },
  { type: 'NodeSilent', fast: fastNodeSilent, schema: nodeSilentData },
  { type: 'RolloutSent', fast: fastRolloutSent, schema: rolloutSentData },
  { type: 'RolloutNodesListed', fast: fastRolloutNodesListed, schema: rolloutNodesListedData },
] as const;

const agrees = (v: unknown): void => {
  for (const c of checks) {
    const fast = c.fast(v);
    if (fast === null) continue;
    const z = c.schema.safeParse(v);
    assert.ok(z.success, `the fast check accepted a ${c.type} zod refuses: ${JSON.stringify(v)}`);
    assert.deepStrictEqual(fast, z.data);
  }
};

const anyJson = fc.jsonValue({ maxDepth: 2 });
/** Mostly a valid value, sometimes anything at all. */
const mostly = <T>(valid: fc.Arbitrary<T>, other: fc.Arbitrary<unknown> = anyJson): fc.Arbitrary<unknown> =>
  fc.oneof({ weight: 12, arbitrary: valid }, { weight: 1, arbitrary: other });
const digest = mostly(
  fc.stringMatching(/^[0-9a-f]{64}$/),
  fc.oneof(fc.constantFrom('A'.repeat(64), 'a'.repeat(63), 'a'.repeat(65), `${'a'.repeat(64)}\n`), anyJson),
);
const time = mostly(
  fc.date({ min: new Date('1970-01-01'), max: new Date('2100-01-01'), noInvalidDate: true }).map((d) => d.toISOString()),
  fc.oneof(
    fc.constantFrom('2026-13-01T00:00:00.000Z', '2026-02-30T00:00:00.000Z', 'yesterday', '', '2026-11-30', '2026-11-30T24:00:00Z'),
    anyJson,
  ),
);
const count = mostly(fc.integer({ min: 1, max: 1_000 }), fc.oneof(fc.constantFrom(0, -1, 0.5, 2 ** 53, 1e300), anyJson));
/** An index from 0 (a RolloutNodesListed's `from`). */
const index = mostly(fc.integer({ min: 0, max: 1_000 }), fc.oneof(fc.constantFrom(-1, 0.5, 2 ** 53, 1e300), anyJson));
const str = mostly(fc.string({ maxLength: 4 }));
const strings = mostly(fc.array(fc.string({ maxLength: 4 }), { maxLength: 3 }), fc.oneof(fc.array(anyJson, { maxLength: 2 }), anyJson));
const nullableString = mostly(fc.oneof(fc.string({ maxLength: 4 }), fc.constant(null)));
const node = mostly(fc.stringMatching(/^[a-z0-9]{1,6}$/), fc.oneof(fc.constant(''), anyJson));

/** Usually null (nothing done), sometimes a value. */
const rarely = <T>(a: fc.Arbitrary<T>): fc.Arbitrary<T | null> =>
  fc.oneof({ weight: 6, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: a });

/** A record of these fields, then maybe one stray key added or one field taken away. */
const shaped = (fields: Record<string, fc.Arbitrary<unknown>>): fc.Arbitrary<unknown> =>
  fc
    .tuple(
      fc.record(fields),
      rarely(fc.constantFrom(...Object.keys(fields))),
      rarely(fc.tuple(fc.constantFrom('extra', '__proto__', 'constructor'), anyJson)),
    )
    .map(([r, drop, add]) => {
      const o: Record<string, unknown> = JSON.parse(JSON.stringify(r)) as Record<string, unknown>;
      if (drop !== null) delete o[drop];
      if (add === null) return o;
      // Through JSON text, so a stray "__proto__" is an own key as JSON.parse makes it.
      const rest = JSON.stringify(o);
      const key = `${JSON.stringify(add[0])}:${JSON.stringify(add[1] ?? null)}`;
      return JSON.parse(rest === '{}' ? `{${key}}` : `{${key},${rest.slice(1)}`) as unknown;
    });

const declarationFields = {
  node,
  serial: count,
  digest,
  specDigest: digest,
  declaration: str,
  signature: str,
  keyId: str,
  resourceIds: strings,
  sentAt: time,
};
const rolloutTag = mostly(
  fc.record({ id: mostly(fc.stringMatching(/^[a-z0-9][a-z0-9._-]{0,8}$/), fc.constantFrom('Not An Id', '')), wave: count }),
  fc.oneof(fc.record({ id: fc.constant('r1'), wave: count, extra: anyJson }), anyJson),
);
const declarations = fc.oneof(shaped(declarationFields), shaped({ ...declarationFields, rollout: rolloutTag }));
const reports = shaped({
  node,
  declared: mostly(fc.oneof(digest, fc.constant(null))),
  applied: strings,
  failed: mostly(
    fc.dictionary(fc.oneof(fc.string({ maxLength: 4 }), fc.constantFrom('__proto__', 'constructor')), mostly(fc.string({ maxLength: 4 })), {
      maxKeys: 3,
    }),
  ),
  refused: str,
  carried: mostly(fc.array(mostly(fc.integer({ min: 1, max: 65_535 }), fc.constantFrom(0.5, 2 ** 53, -1)), { maxLength: 3 })),
  receivedAt: time,
  transport: mostly(shaped({ messageId: nullableString, redelivered: mostly(fc.boolean()), userId: nullableString }), anyJson),
});
const alives = shaped({ node, seenAt: time });
const heards = shaped({ node, at: time, lastSeenBefore: mostly(fc.oneof(time, fc.constant(null))) });
const silents = shaped({ node, lastSeenAt: time, observedAt: time, graceMs: count });
const listOf = (each: fc.Arbitrary<unknown>): fc.Arbitrary<unknown> =>
  mostly(fc.array(mostly(each), { maxLength: 3 }), fc.oneof(fc.array(anyJson, { maxLength: 2 }), anyJson));
const sendFields = { node, serial: count, digest };
const rolloutSents = shaped({
  rollout: mostly(fc.stringMatching(/^[a-z0-9][a-z0-9._-]{0,8}$/), fc.oneof(fc.constantFrom('Not An Id', '', '-r'), anyJson)),
  wave: count,
  sends: listOf(
    fc.oneof(shaped(sendFields), shaped({ ...sendFields, restores: mostly(shaped({ serial: count, digest, specDigest: digest })) })),
  ),
  skipped: listOf(shaped({ node, code: str, reason: str })),
  sentAt: time,
});
const rolloutIds = mostly(fc.stringMatching(/^[a-z0-9][a-z0-9._-]{0,8}$/), fc.oneof(fc.constantFrom('Not An Id', '', '-r'), anyJson));
const nodesListeds = shaped({
  rollout: rolloutIds,
  from: index,
  // At least one node, usually; an empty list sometimes (zod refuses it).
  nodes: mostly(fc.array(node, { minLength: 1, maxLength: 3 }), fc.oneof(fc.constant([]), fc.array(anyJson, { maxLength: 2 }), anyJson)),
  listedAt: time,
});

test('whatever the fast check accepts, zod accepts and returns the same: valid events, each field sometimes wrong, keys missing or added', () => {
  let taken = 0;
  let runs = 0;
  fc.assert(
    fc.property(fc.oneof(declarations, reports, alives, heards, silents, rolloutSents, nodesListeds, anyJson), (v) => {
      runs++;
      if (checks.some((c) => c.fast(v) !== null)) taken++;
      agrees(v);
    }),
    { numRuns: 20_000 },
  );
  // Not a fast path for nothing, and not one that takes everything.
  assert.ok(taken > runs / 10 && taken < runs * 0.9, `the fast check took ${taken} of ${runs}`);
});

const now = new Date('2026-11-30T12:00:00.000Z');
const sent = makeDeclarationSent({ node: 'n1', serial: 2, resources: [{ id: 'web' }, { id: 'db' }], key: testKey, now });
const body = Buffer.from(JSON.stringify({ node: 'n1', declared: sent.data.digest, applied: ['web'], failed: { db: 'disk full' } }));
const report = makeReportReceived(parseReport(body), body, { messageId: 'm-1', redelivered: true, userId: 'n1' }, now);
const alive = makeAliveSeen({ node: 'n1' }, now);
const heard = makeNodeHeard('n1', now.getTime(), null);
const heardAgain = makeNodeHeard('n1', now.getTime() + 90_000, now.getTime());
const silent = makeNodeSilent('n1', now.getTime(), now.getTime() + 60_000, 60_000);
const rolloutSent = makeRolloutEvent('RolloutSent', {
  rollout: 'r1',
  wave: 2,
  sends: [
    { node: 'n1', serial: 2, digest: sent.data.digest },
    {
      node: 'n2',
      serial: 5,
      digest: sent.data.digest,
      restores: { serial: 3, digest: sent.data.digest, specDigest: sent.data.specDigest },
    },
  ],
  skipped: [{ node: 'n3', code: 'CONVERGE_ERR_NODE_HELD', reason: 'held by ops' }],
  sentAt: now.toISOString(),
});
const nodesListed = makeRolloutEvent('RolloutNodesListed', {
  rollout: 'r1',
  from: 0,
  nodes: ['n1', 'n2', 'n3'],
  listedAt: now.toISOString(),
});
const nodesListedLater = makeRolloutEvent('RolloutNodesListed', {
  rollout: 'r1',
  from: 1000,
  nodes: ['n1001'],
  listedAt: now.toISOString(),
});
const stored = (data: unknown): Record<string, unknown> => JSON.parse(JSON.stringify(data)) as Record<string, unknown>;

test('the events the engine writes take the fast check and decode to what zod gives', () => {
  const tagged = { ...sent.data, rollout: { id: 'r1', wave: 3 } };
  for (const [fast, data, schema] of [
    [fastDeclarationSent, sent.data, declarationSentData],
    [fastDeclarationSent, tagged, declarationSentData],
    [fastReportReceived, report.data, reportReceivedData],
    [fastAliveSeen, alive.data, aliveSeenData],
    [fastNodeHeard, heard.data, nodeHeardData],
    [fastNodeHeard, heardAgain.data, nodeHeardData],
    [fastNodeSilent, silent.data, nodeSilentData],
    [fastRolloutSent, rolloutSent.data, rolloutSentData],
    [fastRolloutNodesListed, nodesListed.data, rolloutNodesListedData],
    [fastRolloutNodesListed, nodesListedLater.data, rolloutNodesListedData],
  ] as const) {
    const v = stored(data);
    assert.notEqual(fast(v), null, `not on the fast path: ${JSON.stringify(v)}`);
    assert.deepStrictEqual(fast(v), schema.parse(stored(data)));
  }
});

test('a malformed stored event is still refused by decodeEvent, with zod naming the field', () => {
  const broken: [string, Record<string, unknown>][] = [
    ['DeclarationSent', { ...stored(sent.data), digest: 'zz' }],
    ['DeclarationSent', { ...stored(sent.data), serial: 0 }],
    ['ReportReceived', { ...stored(report.data), receivedAt: 'not a time' }],
    ['ReportReceived', { ...stored(report.data), transport: { messageId: 1, redelivered: false, userId: null } }],
    ['AliveSeen', { node: '', seenAt: now.toISOString() }],
    ['NodeHeard', { ...stored(heard.data), lastSeenBefore: 'never' }],
    ['NodeSilent', { ...stored(silent.data), graceMs: 0 }],
    ['RolloutSent', { ...stored(rolloutSent.data), sends: [{ node: 'n1', serial: 2, digest: 'zz' }] }],
    ['RolloutSent', { ...stored(rolloutSent.data), skipped: [{ node: '', code: 'x', reason: 'y' }] }],
    ['RolloutNodesListed', { ...stored(nodesListed.data), nodes: [] }],
    ['RolloutNodesListed', { ...stored(nodesListed.data), nodes: ['n1', ''] }],
    ['RolloutNodesListed', { ...stored(nodesListed.data), from: -1 }],
  ];
  for (const [type, data] of broken) {
    assert.throws(
      () => decodeEvent(type, data, eventMetadata()),
      (x) => isConvergeError(x, 'CONVERGE_ERR_EVENT_INVALID') && /does not match its schema: \S/.test((x as Error).message),
    );
  }
  // A stray key the schema does not name is stripped, as zod strips it: the slow path answers.
  const extra = decodeEvent('AliveSeen', { ...stored(alive.data), note: 'x' }, eventMetadata());
  assert.deepStrictEqual(extra.data, stored(alive.data));
});

test('a time in Date#toISOString form that the fast check reads, Date.parse reads too (every field at and past its bounds)', () => {
  const two = (n: number): string => String(n).padStart(2, '0');
  let taken = 0;
  for (const year of ['0000', '1970', '2026', '9999'])
    for (let month = 0; month <= 13; month++)
      for (let day = 0; day <= 32; day++)
        for (const [hour, minute, second] of [
          [0, 0, 0],
          [23, 59, 59],
          [24, 0, 0],
          [12, 60, 0],
          [12, 0, 60],
        ] as const) {
          const s = `${year}-${two(month)}-${two(day)}T${two(hour)}:${two(minute)}:${two(second)}.123Z`;
          if (!isPlainIso(s)) continue;
          taken++;
          assert.ok(!Number.isNaN(Date.parse(s)), `${s}: the fast check reads it, Date.parse does not`);
        }
  assert.equal(taken, 4 * 12 * 31 * 2);
  for (const s of ['2026-11-30T12:00:00Z', '2026-11-30T12:00:00.000+00:00', '2026-1-30T12:00:00.000Z', '2026-11-30T12:00:00.00aZ'])
    assert.equal(isPlainIso(s), false, s);
});
