import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import pino from 'pino';
import { foldNode, initialNodeState } from '../../projections/index.ts';
import type { NodeState } from '../../projections/index.ts';
import { createFleetHistory } from '../../src/readModel/fleetHistory.ts';
import { createProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import { replayStore } from '../../src/readModel/replay.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { columnsOf, readNodeColumns } from '../../src/store/index.ts';
import type { EventStore, NodeColumns } from '../../src/store/index.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { readModelAnswers } from '../support/readModelAnswers.ts';

// The bulk folds' columnar read (src/store/nodeColumns.ts): SQLite reads its pages itself (the
// kind and metadata compared in SQL, integers as numbers, fused fast checks, other rows decoded
// whole), any other store's are made from readAll. These properties hold, on stored rows the
// engine never writes as well as on its own:
// - a page of the SQLite read holds, entry for entry, what readAll's events put in columns hold —
//   or both reads fail — with and without a stream prefix, whatever the page size;
// - a replay from the columns (replayStore) is the per-event fold (foldNode over readAll) of each
//   node, stopped at any position;
// - a cold start through the projection runner (the columns into ReadModel.catchUpColumns) leaves
//   the read model, its tallies and positions and the fleet as of any position (`?at=`) as the
//   live path, event by event, leaves them.

const dir = mkdtempSync(join(tmpdir(), 'converge-columns-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const freshPath = (): string => join(dir, `s${files++}.db`);

const digests = ['a', 'b', 'c', 'd'].map((c) => c.repeat(64));
const times = [
  '2026-01-01T00:00:00.000Z',
  '2026-01-01T00:00:01.500Z',
  '2026-01-01T00:01:00.000Z',
  '2026-01-01T00:00:01Z', // another shape: kept as text
  '2026-01-01T01:00:01.500+01:00', // the 00:00:01.500Z instant in other text
  '2025-12-31T23:59:59.999Z',
  '2026-02-31T00:00:00.000Z', // Date.parse takes it (March 3): not isoMs's, kept as text
  '2026-01-02T00:00:00.000Z',
];
const nodes = ['n1', 'n2', 'n3'];
const node = fc.constantFrom(...nodes);
const time = fc.constantFrom(...times);
const digest = fc.constantFrom(...digests);
const ids = ['web', 'db'];

type Row = { type: string; node: string; data: Record<string, unknown>; id: string };

const send: fc.Arbitrary<Row> = fc
  .record({ node, digest, specDigest: digest, serial: fc.integer({ min: 1, max: 9 }), resourceIds: fc.subarray(ids), sentAt: time })
  .map((d) => ({ type: 'DeclarationSent', node: d.node, id: '', data: { declaration: 'AA==', signature: 'AA==', keyId: 'k', ...d } }));
const report: fc.Arbitrary<Row> = fc
  .record({
    node,
    rid: fc.constantFrom('r1', 'r2', 'r3'),
    declared: fc.option(digest, { nil: null }),
    applied: fc.subarray(ids),
    failed: fc.dictionary(fc.constantFrom(...ids, '__proto__'), fc.constant('broke'), { maxKeys: 1 }),
    refused: fc.constantFrom('', 'no'),
    carried: fc.array(fc.integer({ min: 1, max: 9 }), { maxLength: 1 }),
    receivedAt: time,
  })
  .map(({ rid, ...d }) => ({
    type: 'ReportReceived',
    node: d.node,
    id: rid,
    data: { ...d, transport: { messageId: rid, redelivered: false, userId: d.node } },
  }));
const alive: fc.Arbitrary<Row> = fc
  .tuple(node, time)
  .map(([n, seenAt]) => ({ type: 'AliveSeen', node: n, id: '', data: { node: n, seenAt } }));
const heard: fc.Arbitrary<Row> = fc
  .tuple(node, time, fc.option(time, { nil: null }))
  .map(([n, at, lastSeenBefore]) => ({ type: 'NodeHeard', node: n, id: '', data: { node: n, at, lastSeenBefore } }));
const silent: fc.Arbitrary<Row> = fc.tuple(node, time, time).map(([n, lastSeenAt, observedAt]) => ({
  type: 'NodeSilent',
  node: n,
  id: '',
  data: { node: n, lastSeenAt, observedAt, graceMs: 6000 },
}));
const retired: fc.Arbitrary<Row> = fc
  .tuple(node, time)
  .map(([n, at]) => ({ type: 'NodeRetired', node: n, id: '', data: { node: n, at, reason: 'gone' } }));
const resumed: fc.Arbitrary<Row> = time.map((at) => ({
  type: 'RolloutResumed',
  node: '',
  id: '',
  data: { rollout: 'ro', by: 'ops', at },
}));

const valid = (withRollouts: boolean): fc.Arbitrary<Row> =>
  fc.oneof(
    { arbitrary: send, weight: 3 },
    { arbitrary: report, weight: 4 },
    { arbitrary: alive, weight: 3 },
    { arbitrary: heard, weight: 1 },
    { arbitrary: silent, weight: 1 },
    { arbitrary: retired, weight: 1 },
    { arbitrary: resumed, weight: withRollouts ? 1 : 0 },
  );

/** What a stored row may be besides the engine's own: extra keys, a stream of another node, an older metadata version, a broken field. */
type Twist = 'none' | 'extra-key' | 'other-stream' | 'v1' | 'bad-digest' | 'bad-time' | 'no-node';
const twist: fc.Arbitrary<Twist> = fc.oneof(
  { arbitrary: fc.constant<Twist>('none'), weight: 20 },
  { arbitrary: fc.constantFrom<Twist>('extra-key', 'other-stream', 'v1'), weight: 3 },
  { arbitrary: fc.constantFrom<Twist>('bad-digest', 'bad-time', 'no-node'), weight: 1 },
);

/** Rows written straight into a store file, as any writer of the schema could have left them. */
function writeRows(path: string, rows: readonly (readonly [Row, Twist])[]): void {
  void createSqliteEventStore(path).close();
  const db = new Database(path);
  try {
    const insert = db.prepare('INSERT INTO events (id, stream, revision, type, data, metadata) VALUES (?, ?, ?, ?, ?, ?)');
    const revisions = new Map<string, number>();
    rows.forEach(([r, t], i) => {
      let data: Record<string, unknown> = r.data;
      if (t === 'extra-key') data = { ...data, note: 'x' };
      if (t === 'bad-digest' && 'digest' in data) data = { ...data, digest: 'A'.repeat(64) };
      if (t === 'bad-digest' && 'declared' in data) data = { ...data, declared: 'nope' };
      if (t === 'bad-time') data = { ...data, seenAt: 'nope', sentAt: 'nope', receivedAt: 'nope', at: 'nope', lastSeenAt: 'nope' };
      if (t === 'no-node' && 'node' in data) data = { ...data, node: '' };
      const stream = r.type.startsWith('Rollout') ? 'rollout-ro' : t === 'other-stream' ? `node-${r.node}x` : `node-${r.node}`;
      const revision = (revisions.get(stream) ?? -1) + 1;
      revisions.set(stream, revision);
      const id = r.type === 'ReportReceived' ? `${r.node}-${r.id}-${i}` : `e${i}`;
      insert.run(id, stream, revision, r.type, JSON.stringify(data), t === 'v1' ? '{"v":1}' : '{"v":2}');
    });
  } finally {
    db.close();
  }
}

/** Entry i as plain data: what a fold may read of it. */
function entry(c: NodeColumns, i: number) {
  const common = { kind: c.kind[i], position: c.position[i], revision: c.revision[i], node: c.node[i], streamNode: c.streamNode[i] };
  const t = { time: c.time[i], timeText: c.timeText[i] };
  switch (c.kind[i]) {
    case 1:
      return { ...common, ...t, digest: c.digest[i], specDigest: c.specDigest[i], serial: c.serial[i], ids: c.ids[i] };
    case 2:
      return {
        ...common,
        ...t,
        id: c.id[i],
        digest: c.digest[i],
        ids: c.ids[i],
        failed: c.failed[i],
        refused: c.refused[i],
        carried: c.carried[i],
      };
    case 3:
      return { ...common, ...t };
    default:
      return { kind: c.kind[i], position: c.position[i], revision: c.revision[i], streamNode: c.streamNode[i] };
  }
}

/** Every entry of every page, or the error that stopped the read. */
async function entries(pages: AsyncIterable<NodeColumns>): Promise<{ entries: unknown[] } | { failed: true }> {
  const out: unknown[] = [];
  try {
    for await (const c of pages) for (let i = 0; i < c.length; i++) out.push(entry(c, i));
  } catch {
    return { failed: true };
  }
  return { entries: out };
}

async function* fromReadAll(store: EventStore, prefix?: string): AsyncIterable<NodeColumns> {
  for await (const batch of store.readAll(prefix === undefined ? {} : { streamPrefix: prefix })) yield columnsOf(batch);
}

test("SQLite's columnar read holds what readAll's events hold, entry for entry, or fails where readAll fails", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.tuple(valid(true), twist), { maxLength: 40 }),
      fc.integer({ min: 1, max: 7 }),
      fc.integer({ min: 40, max: 2000 }),
      fc.boolean(),
      async (rows, readBatchSize, readBatchBytes, prefixed) => {
        const path = freshPath();
        writeRows(path, rows);
        const store = createSqliteEventStore(path, { readBatchSize, readBatchBytes });
        try {
          const prefix = prefixed ? 'node-' : undefined;
          assert.ok(store.readColumns !== undefined, 'SQLite reads its own columns');
          const columns = await entries(readNodeColumns(store, prefix === undefined ? {} : { streamPrefix: prefix }));
          assert.deepEqual(columns, await entries(fromReadAll(store, prefix)));
        } finally {
          await store.close();
        }
      },
    ),
    { numRuns: 150 },
  );
});

/** The per-event fold of every node over readAll, up to `until`: what replayStore must give. */
async function foldedEventByEvent(store: EventStore, until: bigint | null): Promise<Map<string, NodeState>> {
  const states = new Map<string, NodeState>();
  for await (const batch of store.readAll({ streamPrefix: 'node-' }))
    for (const e of batch) {
      if (until !== null && e.position > until) return states;
      if (!('node' in e.data)) continue;
      const n = e.data.node;
      states.set(n, foldNode(states.get(n) ?? initialNodeState(n), e));
    }
  return states;
}

/** Rows of events every reader takes (no broken digests or times): some with an extra key, some in another node's stream. */
const wellFormedRows = (maxLength: number) =>
  fc.array(
    fc.tuple(
      valid(true),
      twist.filter((t) => t === 'none' || t === 'extra-key' || t === 'other-stream'),
    ),
    { maxLength },
  );

test('a replay from the columnar read is the per-event fold of every node, stopped at any position (SQLite and memory)', async () => {
  await fc.assert(
    fc.asyncProperty(wellFormedRows(50), fc.option(fc.nat({ max: 55 }), { nil: null }), async (rows, stop) => {
      const path = freshPath();
      writeRows(path, rows);
      const sqlite = createSqliteEventStore(path, { readBatchSize: 7 });
      const memory = createMemoryEventStore({ readBatchSize: 5 });
      try {
        for await (const batch of sqlite.readAll())
          for (const e of batch) await memory.append([{ stream: e.stream, expected: 'any', events: [{ ...e }] }]);
        const until = stop === null ? null : BigInt(stop);
        const reference = await foldedEventByEvent(sqlite, until);
        const sortByNode = (m: Map<string, NodeState>) => [...m].sort(([a], [b]) => (a < b ? -1 : 1));
        assert.deepEqual(sortByNode(await replayStore(sqlite, { until })), sortByNode(reference));
        assert.deepEqual(sortByNode(await replayStore(memory, { until })), sortByNode(reference));
      } finally {
        await sqlite.close();
        await memory.close();
      }
    }),
    { numRuns: 150 },
  );
});

const now = Date.parse('2026-01-01T00:00:30Z');

test("a cold start through the columnar read leaves the read model, tallies, positions and `?at=` answers as the live path's, event by event", async () => {
  await fc.assert(
    fc.asyncProperty(wellFormedRows(40), fc.array(fc.nat({ max: 45 }), { minLength: 1, maxLength: 4 }), async (rows, asked) => {
      const path = freshPath();
      writeRows(path, rows);
      const logger = pino({ level: 'silent' });
      const run = async (catchUp: 'bulk' | 'per-event') => {
        const store = createSqliteEventStore(path, { readBatchSize: 6 });
        try {
          const runner = createProjectionRunner({ store, logger, catchUp, now: () => now });
          const fleet = createFleetHistory({ store, readModel: runner.readModel });
          await runner.start();
          await runner.caughtUp();
          const asOf = [];
          for (const p of asked) asOf.push(await fleet.at({ kind: 'position', position: BigInt(p) }));
          for (const t of times.slice(0, 3)) asOf.push(await fleet.at({ kind: 'time', time: Date.parse(t), iso: t }));
          await runner.stop();
          fleet.stop();
          return { model: readModelAnswers(runner.readModel, now), asOf, rollouts: runner.rollouts.list() };
        } finally {
          await store.close();
        }
      };
      assert.deepEqual(await run('bulk'), await run('per-event'));
    }),
    { numRuns: 40 },
  );
});
