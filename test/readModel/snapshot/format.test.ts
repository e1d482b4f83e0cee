import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import fc from 'fast-check';
import { nodeStatuses, reportClasses } from '../../../projections/index.ts';
import type { NodeState } from '../../../projections/index.ts';
import { parseSnapshot, readSnapshot, rejectionOf, snapshotFormat, writeSnapshot } from '../../../src/readModel/snapshot/snapshotFile.ts';
import type { Snapshot } from '../../../src/readModel/snapshot/snapshotFile.ts';
import { encodeColumn } from '../../../src/readModel/snapshot/columnParts.ts';
import type { Part } from '../../../src/readModel/snapshot/columnParts.ts';
import { encodeColumnSliced } from '../../../src/readModel/snapshot/columnPartsSliced.ts';
import { columnNames } from '../../../src/readModel/snapshot/columns.ts';
import { createEncoder } from '../../../src/readModel/snapshot/encoder.ts';
import { encodeSnapshot4 } from '../../../src/readModel/snapshot/jsonLinesV4.ts';
import { tempDir } from '../../support/tempDir.ts';
import { asFormat5 } from '../../support/snapshotFormat5.ts';

// The snapshot's format alone: whatever read model is written comes back the same,
// value for value and type for type — binary columns, the JSON a column falls back to, each node's
// latest liveness transition, formats 4 and 5.
// Whether a snapshot is believed (consistency, cross-check) is trust.test.ts.

const dir = tempDir({ after }, 'converge-snapformat-');
const digest = fc.stringMatching(/^[0-9a-f]{64}$/);
const time = fc.oneof(
  fc.date({ min: new Date('2000-01-01Z'), max: new Date('2100-01-01Z'), noInvalidDate: true }).map((d) => d.toISOString()),
  fc.string({ maxLength: 30, unit: 'binary' }),
);
// Any UTF-16, lone surrogates included: JSON keeps them, UTF-8 would not (that column falls back to JSON).
const text = fc.string({ maxLength: 12, unit: 'binary' });
const ids = fc.array(fc.oneof(fc.constantFrom('web', 'db', '__proto__', '$big'), text), { maxLength: 4 });
const count = fc.oneof(fc.nat({ max: 200 }), fc.nat(), fc.maxSafeNat());
const latency = fc.oneof(fc.nat({ max: 100_000 }), fc.double({ min: 0, max: 1e9, noNaN: true })).map((v) => (v === 0 ? 0 : v));

/** Objects as the fold makes them (fast-check also makes some without a prototype). */
const plain = { noNullPrototype: true } as const;
const sent = fc.record(
  {
    digest,
    specDigest: digest,
    serial: count,
    sentAt: time,
    resourceIds: ids,
    acknowledgedAt: fc.option(time),
  },
  plain,
);
const reported = fc.record(
  {
    declared: fc.option(digest),
    receivedAt: time,
    applied: ids,
    failed: fc.dictionary(fc.oneof(fc.constantFrom('db', '__proto__'), text), text, { maxKeys: 2, noNullPrototype: true }),
    refused: fc.oneof(fc.constant(''), text),
    carried: fc.array(fc.integer({ min: 1, max: 65_535 }), { maxLength: 3 }),
    class: fc.constantFrom(...reportClasses),
  },
  plain,
);

/** Any state the format must carry: values of the right types, not necessarily a fold's (the trust checks are elsewhere). */
const state = (node: string, big: boolean) =>
  fc
    .record({
      status: fc.constantFrom(...nodeStatuses),
      caughtUp: fc.boolean(),
      sent: fc.option(sent),
      reported: fc.option(reported),
      missing: ids,
      carried: fc.array(fc.integer({ min: 1, max: 65_535 }), { maxLength: 3 }),
      lastSeenAt: fc.option(time),
      retiredAt: fc.option(time),
      // Times the fold shares with the report's: the writer's `true`.
      ackIsReport: fc.boolean(),
      seenIsReport: fc.boolean(),
      declaredIsSent: fc.boolean(),
      anomalies: fc.record({ stale: count, unknown: count, undeclared: count }, plain),
      convergence: fc.record(
        {
          lastLatencyMs: fc.option(latency),
          recentLatenciesMs: fc.array(latency, { maxLength: 16 }),
          acknowledged: count,
          superseded: count,
        },
        plain,
      ),
      earlierSends: fc.array(fc.tuple(digest, count), { maxLength: 7 }),
      reports: count,
      lastReportId: fc.option(text.filter((s) => s.length > 0)),
      position: big ? fc.bigInt({ min: 0n, max: 2n ** 63n - 1n }) : fc.bigInt({ min: 0n, max: 2n ** 40n }),
      revision: fc.bigInt({ min: -1n, max: big ? 2n ** 62n : 100_000n }),
    })
    .map((r): NodeState => {
      const s = r.sent === null ? null : { ...r.sent };
      const p = r.reported === null ? null : { ...r.reported };
      if (s !== null && p !== null) {
        if (r.ackIsReport) s.acknowledgedAt = p.receivedAt;
        if (r.declaredIsSent) p.declared = s.digest;
      }
      return {
        node,
        status: r.status,
        caughtUp: r.caughtUp,
        sent: s,
        reported: p,
        missing: r.missing,
        carried: r.carried,
        lastSeenAt: p !== null && r.seenIsReport ? p.receivedAt : r.lastSeenAt,
        retiredAt: r.retiredAt,
        anomalies: r.anomalies,
        convergence: r.convergence,
        earlierSends: r.earlierSends,
        reports: r.reports,
        lastReportId: r.lastReportId,
        position: r.position,
        revision: r.revision,
      };
    });

const readModel = fc.boolean().chain((big) =>
  fc
    .uniqueArray(
      fc.oneof(
        fc.stringMatching(/^node-[0-9]{1,4}$/),
        text.filter((s) => s.length > 0),
      ),
      { maxLength: 12 },
    )
    .chain((nodes) => fc.tuple(fc.constant(big), fc.tuple(...nodes.map((n) => state(n, big))))),
);

const snapshotOf = (big: boolean, states: readonly NodeState[]): Snapshot => ({
  format: snapshotFormat,
  foldVersion: 7,
  // Past 2^53 the position columns are written as decimal strings (JSON), as format 4 did.
  position: big ? 2n ** 63n - 1n : 2n ** 41n,
  eventId: 'DeclarationSent/n/1',
  writtenAt: '2026-11-30T15:00:00.000Z',
  states,
  // None, NodeHeard, NodeSilent in turn (snapshot/transitions.ts's codes).
  transitions: Uint8Array.from(states, (_, i) => i % 3),
});

test('save → restore is the identity for any read model (format 6)', async () => {
  let run = 0;
  await fc.assert(
    fc.asyncProperty(readModel, async ([big, states]) => {
      const path = join(dir, `identity-${run++}.snapshot`);
      const snap = snapshotOf(big, states);
      await writeSnapshot(path, snap);
      const back = await readSnapshot(path);
      assert.ok(back !== null);
      assert.equal(back.format, snapshotFormat);
      assert.deepStrictEqual(back, snap);
    }),
    { numRuns: 300 },
  );
});

test('a format-4 snapshot (JSON lines) is still read, to the same states', async () => {
  await fc.assert(
    fc.property(readModel, ([big, states]) => {
      const snap = snapshotOf(big, states);
      const bytes = Buffer.from(
        encodeSnapshot4(snap, (t) => createHash('sha256').update(t, 'utf8').digest('hex')),
        'utf8',
      );
      assert.deepStrictEqual(parseSnapshot(bytes), { ...snap, format: 4, transitions: null });
    }),
    { numRuns: 100 },
  );
});

test('a format-5 snapshot (no transitions) is still read, to the same states and no transitions', async () => {
  let run = 0;
  await fc.assert(
    fc.asyncProperty(readModel, async ([big, states]) => {
      const path = join(dir, `format5-${run++}.snapshot`);
      const snap = snapshotOf(big, states);
      await writeSnapshot(path, snap);
      assert.deepStrictEqual(parseSnapshot(asFormat5(readFileSync(path))), { ...snap, format: 5, transitions: null });
    }),
    { numRuns: 100 },
  );
});

const bytesOf = (parts: readonly Part[]): [string, string, string][] => parts.map((p) => [p.name, p.kind, p.bytes.toString('hex')]);

/** Column values the binary form may not hold: surrogates split across values, -0, NaN, 2^53, strings where numbers belong. */
const odd = fc.oneof(
  fc.constantFrom(
    null,
    true,
    false,
    -0,
    0,
    127,
    128,
    -129,
    2 ** 31,
    -(2 ** 31) - 1,
    0.5,
    NaN,
    Infinity,
    2 ** 53,
    '\ud800',
    '\udc00',
    'NaN',
    '',
  ),
  fc.string({ maxLength: 3, unit: 'binary' }),
  fc.string({ maxLength: 3, unit: fc.constantFrom('\ud83d', '\ude00', 'a', 'é') }),
  fc.stringMatching(/^[0-9a-f]{64}$/),
  fc.integer(),
  fc.double(),
  fc.array(fc.oneof(fc.integer(), fc.double(), fc.constant('x')), { maxLength: 3 }),
  fc.array(fc.tuple(fc.oneof(fc.stringMatching(/^[0-9a-f]{64}$/), fc.constant('\ud800')), fc.oneof(fc.nat(), fc.constant(-0))), {
    maxLength: 3,
  }),
);

test('a column encoded slice by slice is byte for byte the one-shot encoding, for any read model and any slice size', async () => {
  await fc.assert(
    fc.asyncProperty(readModel, fc.integer({ min: 1, max: 20 }), async ([big, states], slice) => {
      const encoder = createEncoder(states, snapshotOf(big, states).position);
      for (const name of columnNames) {
        const values = encoder.values(name, 0, states.length);
        let pauses = 0;
        const sliced = await encodeColumnSliced(name, values, slice, async () => {
          pauses++;
        });
        assert.deepStrictEqual(bytesOf(sliced), bytesOf(encodeColumn(name, values)), name);
        assert.ok(values.length <= slice || pauses > 0, 'yields between slices');
      }
    }),
    { numRuns: 200 },
  );
});

test('odd column values (forged types, split surrogate pairs, -0, past 2^53) encode slice by slice to the one-shot bytes, JSON included', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.constantFrom(...columnNames),
      fc.array(odd, { maxLength: 24 }),
      fc.integer({ min: 1, max: 30 }),
      async (name, values, slice) => {
        const sliced = await encodeColumnSliced(name, values, slice, async () => undefined);
        assert.deepStrictEqual(bytesOf(sliced), bytesOf(encodeColumn(name, values)));
      },
    ),
    { numRuns: 2000 },
  );
  // The cases the sliced text must get right at a slice's edge: a pair split across two values (and slices) is one character.
  for (const slice of [1, 2, 3]) {
    for (const values of [['a\ud83d', '\ude00b'], ['\ud83d', '\ude00'], ['x', '\ud83d'], ['\ud83d'], [], ['ab'.repeat(32), null, true]]) {
      for (const name of ['refused', 'sentAt', 'earlierSends'] as const) {
        const vs = name === 'earlierSends' ? values.map((v) => [[v, 1]]) : values;
        const sliced = await encodeColumnSliced(name, vs, slice, async () => undefined);
        assert.deepStrictEqual(bytesOf(sliced), bytesOf(encodeColumn(name, vs)), `${name} ${JSON.stringify(vs)} / ${slice}`);
      }
    }
  }
});

test('a column the binary form cannot hold exactly is written as JSON, and a wrong value there is named by the schema', async () => {
  assert.deepEqual(
    encodeColumn('refused', ['', 'no', '\ud800']).map((p) => p.kind),
    ['json'],
  );
  assert.deepEqual(
    encodeColumn('reports', [0, 'NaN']).map((p) => p.kind),
    ['json'],
  );
  assert.deepEqual(
    encodeColumn('reports', [0, 300, 2 ** 40]).map((p) => p.kind),
    ['f64'],
  );
  assert.deepEqual(
    encodeColumn('sentAt', [null, '2026-01-01T00:00:00.000Z', true]).map((p) => [p.name, p.kind]),
    [
      ['sentAt', 'i8'],
      ['sentAt.text', 'utf8'],
    ],
  );
  // Digests as their bytes; a column with any other string keeps its text.
  assert.deepEqual(
    encodeColumn('declared', [true, null, 'ab'.repeat(32)]).map((p) => [p.kind, p.bytes.length]),
    [
      ['i8', 3],
      ['hex', 32],
    ],
  );
  assert.deepEqual(
    encodeColumn('declared', ['AB'.repeat(32), 'ab'.repeat(32)]).map((p) => p.kind),
    ['i8', 'utf8'],
  );
  const path = join(dir, 'wrong.snapshot');
  const [, states] = fc.sample(
    readModel.filter(([, s]) => s.length > 0),
    { numRuns: 1, seed: 7 },
  )[0]!;
  await writeSnapshot(
    path,
    snapshotOf(
      false,
      states.map((s, i) => (i === 0 ? ({ ...s, reports: -1 } as NodeState) : s)),
    ),
  );
  await assert.rejects(readSnapshot(path), (e: Error) => rejectionOf(e) === 'schema' && /reports\[0\]/.test(e.message));
});

test('earlier sends read in place are checked as the general reader checks them: a bad serial or digest is named', async () => {
  const [, states] = fc.sample(
    readModel.filter(([, s]) => s.length > 1),
    { numRuns: 1, seed: 5 },
  )[0]!;
  const good = 'ab'.repeat(32);
  const cases: [string, NodeState['earlierSends']][] = [
    [
      'serial',
      [
        [good, 3],
        [good, -1],
      ],
    ],
    [
      'upper',
      [
        [good, 3],
        ['AB'.repeat(32), 2],
      ],
    ],
    ['short', [['ab'.repeat(31), 3]]],
  ];
  for (const [name, earlier] of cases) {
    const path = join(dir, `earlier-${name}.snapshot`);
    const honest = states.map((s) => ({ ...s, earlierSends: [[good, 1]] as NodeState['earlierSends'] }));
    await writeSnapshot(path, snapshotOf(false, honest));
    assert.deepStrictEqual((await readSnapshot(path))?.states, honest);
    await writeSnapshot(
      path,
      snapshotOf(
        false,
        honest.map((s, i) => (i === 1 ? { ...s, earlierSends: earlier } : s)),
      ),
    );
    await assert.rejects(readSnapshot(path), (e: Error) => rejectionOf(e) === 'schema' && /earlierSends\[1\]/.test(e.message), name);
  }
});

test('a part cut out and the file resealed is refused, never read short', async () => {
  const path = join(dir, 'cut.snapshot');
  const [, states] = fc.sample(
    readModel.filter(([, s]) => s.length > 1),
    { numRuns: 1, seed: 3 },
  )[0]!;
  await writeSnapshot(path, snapshotOf(false, states));
  const bytes = readFileSync(path);
  // Drop the last part (the failures table) and reseal: header, parts, newline, trailer.
  const trailerStart = bytes.lastIndexOf(0x0a, bytes.length - 2) + 1;
  const lastPart = bytes.lastIndexOf(Buffer.from('["failures"'));
  const body = Buffer.concat([bytes.subarray(0, lastPart - 4), Buffer.from('\n')]);
  assert.ok(lastPart > 0 && lastPart < trailerStart);
  const sha = createHash('sha256').update(body).digest('hex');
  writeFileSync(path, Buffer.concat([body, Buffer.from(`{"sha256":"${sha}"}\n`)]));
  await assert.rejects(readSnapshot(path), (e: Error) => rejectionOf(e) === 'truncated' && /failures/.test(e.message));
});

test('a snapshot cut short anywhere, its header line included, is refused as truncated, not as a format this engine does not read', async () => {
  const path = join(dir, 'short.snapshot');
  const [, states] = fc.sample(
    readModel.filter(([, s]) => s.length > 1),
    { numRuns: 1, seed: 5 },
  )[0]!;
  await writeSnapshot(path, snapshotOf(false, states));
  const bytes = readFileSync(path);
  const headerEnd = bytes.indexOf(0x0a);
  for (let n = 1; n < bytes.length; n++) {
    assert.throws(
      () => parseSnapshot(bytes.subarray(0, n)),
      (e: Error) => rejectionOf(e) === 'truncated' && !/this engine reads/.test(e.message),
      `cut at byte ${n} of ${bytes.length} (header line ends at ${headerEnd})`,
    );
  }
  // A format-3 snapshot (one JSON object, no newline) is still named for its format.
  assert.throws(
    () => parseSnapshot(Buffer.from('{"format":3,"foldVersion":3,"states":[]}')),
    (e: Error) => rejectionOf(e) === 'format' && /format 3/.test(e.message),
  );
});

test('a header whose format field is damaged is refused as not valid, not as a format this engine does not read', async () => {
  const path = join(dir, 'damaged-header.snapshot');
  await writeSnapshot(path, snapshotOf(false, []));
  const bytes = readFileSync(path);
  const f = `"format":${snapshotFormat}`;
  for (const [from, to] of [
    [f, `"formal":${snapshotFormat}`],
    [f, `"format":"${snapshotFormat}"`],
  ] as const) {
    const damaged = Buffer.from(bytes.toString('latin1').replace(from, to), 'latin1');
    assert.throws(
      () => parseSnapshot(damaged),
      (e: Error) => rejectionOf(e) === 'schema' && /format/.test(e.message),
      `${from} → ${to}`,
    );
  }
});

test('a write given up midway leaves the snapshot in place as it was and no temporary file', async () => {
  const path = join(dir, 'given-up.snapshot');
  const [, states] = fc.sample(
    readModel.filter(([, s]) => s.length > 1),
    { numRuns: 1, seed: 9 },
  )[0]!;
  await writeSnapshot(path, snapshotOf(false, states));
  const before = readFileSync(path);
  const abort = new AbortController();
  // Given up at the first slice's yield: after the temporary file is opened, before its rename.
  const writing = writeSnapshot(path, snapshotOf(false, states.slice(1)), abort.signal);
  abort.abort();
  await assert.rejects(writing, (e: Error) => e.name === 'AbortError');
  assert.deepEqual(readFileSync(path), before);
  assert.deepEqual(
    readdirSync(dir).filter((f) => f.startsWith('given-up.snapshot.')),
    [],
  );
});
