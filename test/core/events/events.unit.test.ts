import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isConvergeError } from '../../../src/core/errors.ts';
import {
  aliveSeenId,
  declarationSentId,
  decodeEvent,
  eventMetadata,
  makeAliveSeen,
  makeDeclarationSent,
  makeReportReceived,
  makeRolloutEvent,
  reportReceivedId,
  rolloutEventId,
  rolloutSendId,
  uuidV5,
} from '../../../src/core/events/index.ts';
import { specDigestOf } from '../../../src/core/declaration/index.ts';
import { parseReport } from '../../../src/core/wire/index.ts';
import { testKey } from '../../support/history.ts';
import { vectorBytes } from '../../support/vectors.ts';

const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

test('event ids are deterministic UUIDs: same node+serial or same message gives the same id', () => {
  assert.equal(declarationSentId('n1', 3), declarationSentId('n1', 3));
  assert.notEqual(declarationSentId('n1', 3), declarationSentId('n1', 4));
  assert.notEqual(declarationSentId('n1', 3), declarationSentId('n2', 3));
  assert.match(declarationSentId('n1', 3), uuid);
  const body = Buffer.from('{"node":"n1"}');
  assert.equal(reportReceivedId('n1', 'm-1', body), reportReceivedId('n1', 'm-1', Buffer.from('other')));
  assert.equal(reportReceivedId('n1', null, body), reportReceivedId('n1', null, Buffer.from('{"node":"n1"}')));
  assert.notEqual(reportReceivedId('n1', null, body), reportReceivedId('n1', null, Buffer.from('{"node":"n1","applied":["a"]}')));
  assert.match(aliveSeenId('n1', '2026-11-29T12:00:00.000Z'), uuid);
});

test('uuidV5 matches RFC 4122 for the DNS namespace example', () => {
  // Well-known: uuid v5 of "www.example.com" in the DNS namespace.
  assert.equal(uuidV5('www.example.com', '6ba7b810-9dad-11d1-80b4-00c04fd430c8'), '2ed6657d-e927-568b-95e1-2665a8aea6a2');
});

test('event ids keep the values stored by earlier versions: a store written before stays idempotent', () => {
  // Made by the createHash-based uuidV5 before the ingest speed-up; any change here re-keys every stored event.
  assert.equal(declarationSentId('edge-07', 12), '1a98c353-c6c7-512b-a3a2-0ea8399de353');
  assert.equal(reportReceivedId('edge-07', 'm-1', Buffer.from('{}')), '310738e1-b217-588e-8cfd-4b2d837f0ed3');
  assert.equal(
    reportReceivedId('edge-07', null, Buffer.from('{"node":"edge-07","applied":["web"]}')),
    '533968c6-0b05-5262-97af-b51c0261850e',
  );
  assert.equal(aliveSeenId('edge-07', '2026-11-29T12:00:00.000Z'), '16ecefe3-a649-5ec3-b169-5e7c226208e5');
  assert.equal(uuidV5('ReportReceived/nœud-ü/msg/☃'), '0a853311-919e-5d32-9d3c-4b6aa8ddb8f2');
  assert.equal(uuidV5('x'.repeat(5000)), 'ee23ba2e-09c7-58f1-aa9f-49043af81205');
});

test('the same send built twice has the same id and the same digest only if the time is the same', () => {
  const now = new Date('2026-11-29T12:00:00Z');
  const a = makeDeclarationSent({ node: 'n1', serial: 1, resources: [{ id: 'web' }], key: testKey, now });
  const b = makeDeclarationSent({ node: 'n1', serial: 1, resources: [{ id: 'web' }], key: testKey, now });
  assert.deepEqual(a, b);
  assert.deepEqual(a.data.resourceIds, ['web']);
  assert.equal(Buffer.from(a.data.declaration, 'base64').toString().includes('"serial":1'), true);
});

test('stored events are read back through their schema, and a malformed one is refused', () => {
  const body = vectorBytes('report-failed.json');
  const e = makeReportReceived(parseReport(body), body, { messageId: null, redelivered: true, userId: 'edge-07' }, new Date());
  const stored = JSON.parse(JSON.stringify(e.data)) as unknown;
  assert.deepEqual(decodeEvent('ReportReceived', stored, eventMetadata()), { type: 'ReportReceived', data: e.data });
  assert.throws(
    () => decodeEvent('ReportReceived', { ...(stored as object), declared: 'zz' }),
    (x) => isConvergeError(x, 'CONVERGE_ERR_EVENT_INVALID'),
  );
  assert.throws(
    () => decodeEvent('NodeExploded', {}),
    (x) => isConvergeError(x, 'CONVERGE_ERR_EVENT_INVALID'),
  );
  assert.throws(() => decodeEvent('AliveSeen', { node: 'n', seenAt: '2026-11-29T12:00:00Z' }, { v: 99 }), /newer Converge/);
});

test('a v1 DeclarationSent (before spec digests) is read back with the spec digest of its own bytes', () => {
  const e = makeDeclarationSent({
    node: 'n1',
    serial: 4,
    resources: [{ id: 'web', image: 'nginx' }, { id: 'db' }],
    key: testKey,
    now: new Date('2026-11-29T12:00:00Z'),
  });
  const { specDigest, ...v1 } = e.data;
  const decoded = decodeEvent('DeclarationSent', v1, { v: 1 });
  assert.equal(decoded.type, 'DeclarationSent');
  assert.equal(decoded.type === 'DeclarationSent' ? decoded.data.specDigest : null, specDigest);
  assert.equal(specDigest, specDigestOf([{ id: 'db' }, { image: 'nginx', id: 'web' }]));
  assert.deepEqual(eventMetadata(), { v: 2 });
  assert.throws(
    () => decodeEvent('DeclarationSent', { ...v1, declaration: Buffer.from('not json').toString('base64') }, { v: 1 }),
    (err: unknown) => isConvergeError(err, 'CONVERGE_ERR_EVENT_INVALID'),
  );
});

test("a rollout's send is named by the rollout and the node, whatever its serial; other sends keep node + serial", () => {
  const now = new Date('2026-11-30T14:00:00Z');
  const rollout = { id: 'r-canary', wave: 2 };
  const a = makeDeclarationSent({ node: 'n1', serial: 3, resources: [{ id: 'web' }], key: testKey, now, rollout });
  const b = makeDeclarationSent({ node: 'n1', serial: 4, resources: [{ id: 'web' }], key: testKey, now, rollout });
  assert.equal(a.id, b.id, 'a retry from a stale view cannot record a second send from this rollout');
  assert.equal(a.id, rolloutSendId('n1', 'r-canary'));
  assert.notEqual(a.id, declarationSentId('n1', 3));
  assert.deepEqual(a.data.rollout, rollout);
  const plain = makeDeclarationSent({ node: 'n1', serial: 3, resources: [{ id: 'web' }], key: testKey, now });
  assert.equal(plain.id, declarationSentId('n1', 3));
  assert.equal('rollout' in plain.data, false);
});

test('the rollout tag is optional in the stored DeclarationSent: untagged events read as before, tagged ones keep it', () => {
  const now = new Date('2026-11-30T14:00:00Z');
  const tagged = makeDeclarationSent({
    node: 'n1',
    serial: 1,
    resources: [{ id: 'web' }],
    key: testKey,
    now,
    rollout: { id: 'r1', wave: 1 },
  });
  const stored = JSON.parse(JSON.stringify(tagged.data)) as Record<string, unknown>;
  assert.deepEqual(decodeEvent('DeclarationSent', stored, eventMetadata()).data, tagged.data);
  const { rollout: _tag, ...untagged } = stored;
  assert.deepEqual(decodeEvent('DeclarationSent', untagged, eventMetadata()).data, untagged);
  assert.throws(
    () => decodeEvent('DeclarationSent', { ...stored, rollout: { id: 'Not An Id', wave: 1 } }, eventMetadata()),
    (x) => isConvergeError(x, 'CONVERGE_ERR_EVENT_INVALID'),
  );
});

test('rollout events decode through their schemas; one claiming the v1 shape they never had is refused', () => {
  const e = makeRolloutEvent(
    'RolloutPaused',
    { rollout: 'r1', by: 'ops', reason: 'lunch', at: '2026-11-30T14:00:00.000Z' },
    { revision: 4n },
  );
  assert.equal(e.id, rolloutEventId('r1', 'RolloutPaused', 4n));
  assert.deepEqual(decodeEvent('RolloutPaused', JSON.parse(JSON.stringify(e.data)), eventMetadata()), { type: e.type, data: e.data });
  assert.throws(
    () => decodeEvent('RolloutPaused', e.data, { v: 1 }),
    (x) => isConvergeError(x, 'CONVERGE_ERR_EVENT_INVALID') && /no upcaster/.test((x as Error).message),
  );
  assert.throws(
    () => decodeEvent('WaveStarted', { rollout: 'r1', wave: 0, from: 0, to: 1, startedAt: '2026-11-30T14:00:00.000Z' }, eventMetadata()),
    (x) => isConvergeError(x, 'CONVERGE_ERR_EVENT_INVALID'),
  );
  // Same decision, same id: two drivers that both open wave 2 write one event.
  const w = { rollout: 'r1', wave: 2, from: 1, to: 5, startedAt: '2026-11-30T14:00:00.000Z' };
  assert.equal(makeRolloutEvent('WaveStarted', w).id, makeRolloutEvent('WaveStarted', { ...w, startedAt: '2026-11-30T15:00:00.000Z' }).id);
});

test('a receipt time given in ms makes the same event as the same time given as a Date (ingest passes ms)', () => {
  const report = parseReport(Buffer.from('{"node":"n1","applied":["a"],"carried":[8080]}'));
  const body = Buffer.from('{}');
  const transport = { messageId: 'm-1', redelivered: false, userId: 'n1' };
  // Each instant twice in a row (the formatted time is shared within a millisecond), then another.
  for (const ms of [0, 1_767_225_600_000, 1_767_225_600_000, 1_767_225_600_001, 253_402_300_799_999, -1]) {
    assert.deepEqual(makeReportReceived(report, body, transport, ms), makeReportReceived(report, body, transport, new Date(ms)));
    assert.deepEqual(makeAliveSeen({ node: 'n1' }, ms), makeAliveSeen({ node: 'n1' }, new Date(ms)));
  }
  assert.equal(makeReportReceived(report, body, transport, 1_767_225_600_000).data.receivedAt, '2026-01-01T00:00:00.000Z');
  // An invalid time is refused as an invalid Date is (toISOString's RangeError), however it comes.
  assert.throws(() => makeReportReceived(report, body, transport, Number.NaN), RangeError);
  assert.throws(() => makeReportReceived(report, body, transport, new Date(Number.NaN)), RangeError);
  assert.throws(() => makeAliveSeen({ node: 'n1' }, 8.64e15 + 1), RangeError);
});
