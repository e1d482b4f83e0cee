import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { isConvergeError } from '../../src/core/errors.ts';
import { makeAliveSeen, makeReportReceived, makeRolloutEvent, streamOf } from '../../src/core/events/index.ts';
import type { Recorded } from '../../src/core/events/index.ts';
import { createSqliteEventStore, sqliteSchemaVersion } from '../../src/store/sqlite/sqliteEventStore.ts';
import { openEventStore } from '../../src/store/index.ts';
import { batchEventIds, batchWrites } from './fixtures/sqliteAppender.ts';
import { until } from '../support/until.ts';

const dir = mkdtempSync(join(tmpdir(), 'converge-sqlite-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const fresh = (): string => join(dir, `s${n++}.db`);

const refusesWithSchema = (path: string, pattern: RegExp): void => {
  assert.throws(
    () => createSqliteEventStore(path),
    (err: unknown) => isConvergeError(err, 'CONVERGE_ERR_STORE_SCHEMA') && pattern.test(err.message),
  );
};

test('a new file gets the current schema version, WAL journal and a Converge application id', async () => {
  const path = fresh();
  await createSqliteEventStore(path).close();
  const db = new Database(path, { readonly: true });
  try {
    assert.equal(db.pragma('user_version', { simple: true }), sqliteSchemaVersion);
    assert.equal(db.pragma('journal_mode', { simple: true }), 'wal');
    assert.equal(db.pragma('application_id', { simple: true }), 0x434e5647);
  } finally {
    db.close();
  }
});

test('a store file written by a newer schema version is refused with STORE_SCHEMA, and left untouched', async () => {
  const path = fresh();
  await createSqliteEventStore(path).close();
  const db = new Database(path);
  db.pragma(`user_version = ${sqliteSchemaVersion + 1}`);
  db.close();
  refusesWithSchema(path, /newer Converge/);
  const again = new Database(path, { readonly: true });
  assert.equal(again.pragma('user_version', { simple: true }), sqliteSchemaVersion + 1);
  again.close();
});

test('a store file at a schema version with no migration path is refused with STORE_SCHEMA', async () => {
  const path = fresh();
  await createSqliteEventStore(path).close();
  const db = new Database(path);
  db.pragma('user_version = 0');
  db.close();
  refusesWithSchema(path, /no migration/);
});

test('a SQLite file that is not a Converge store is refused, not altered', () => {
  const path = fresh();
  const db = new Database(path);
  db.exec('CREATE TABLE something_else (x)');
  db.close();
  refusesWithSchema(path, /not a Converge event store/);
});

test('a file that is not SQLite at all is refused with STORE_SCHEMA', () => {
  const path = fresh();
  writeFileSync(path, 'this is not a database, it is a text file long enough to have a header'.repeat(20));
  refusesWithSchema(path, /not a readable SQLite database/);
});

test('openEventStore picks the adapter from the url and refuses an unknown scheme', async () => {
  const mem = await openEventStore('memory:');
  assert.equal(mem.kind, 'memory');
  await mem.close();
  const sqlite = await openEventStore(`sqlite:${fresh()}`);
  assert.equal(sqlite.kind, 'sqlite');
  await sqlite.close();
  await assert.rejects(
    () => openEventStore('mysql://x'),
    (err: unknown) => isConvergeError(err, 'CONVERGE_ERR_CONFIG_INVALID'),
  );
});

test('two handles on one file in one process: a subscription on one sees appends through the other', async () => {
  const path = fresh();
  const a = createSqliteEventStore(path, { pollMs: 60_000 });
  const b = createSqliteEventStore(path, { pollMs: 60_000 });
  const seen: Recorded[] = [];
  const sub = a.subscribe({ handler: (ev) => void seen.push(...ev) });
  try {
    await b.append([
      {
        stream: 'node-x',
        expected: 'no_stream',
        events: [{ id: batchEventIds('two', 0)[0]!, type: 'AliveSeen', data: { node: 'x', seenAt: '2024-01-01T00:00:00.000Z' } }],
      },
    ]);
    // pollMs is a minute, so only the shared in-process notifier can deliver this in time.
    await until('the notifier to deliver the batch', () => seen.length > 0);
    assert.equal(seen.length, 1);
  } finally {
    await sub.stop();
    await a.close();
    await b.close();
  }
});

test('a live subscription sees batches appended by another process (polling)', { timeout: 60_000 }, async () => {
  const path = fresh();
  const store = createSqliteEventStore(path, { pollMs: 50 });
  const seen = new Set<string>();
  const sub = store.subscribe({ handler: (ev) => ev.forEach((e) => seen.add(e.id)) });
  try {
    const appender = fileURLToPath(new URL('./fixtures/sqliteAppender.ts', import.meta.url));
    const child = spawn(process.execPath, ['--import', 'tsx', appender, path, 'xp', '3'], { stdio: ['ignore', 'ignore', 'inherit'] });
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    assert.equal(code, 0);
    const want = [0, 1, 2].flatMap((b) => batchEventIds('xp', b));
    await until('every batch the other process appended', () => want.every((id) => seen.has(id)), { everyMs: 20 });
    assert.deepEqual(
      want.filter((id) => !seen.has(id)),
      [],
    );
  } finally {
    await sub.stop();
    await store.close();
  }
});

test("two handles appending to one stream in turn each see the other's revisions", async () => {
  const path = fresh();
  const a = createSqliteEventStore(path);
  const b = createSqliteEventStore(path);
  const ids = batchEventIds('turns', 0);
  const ev = (i: number) => ({ id: ids[i]!, type: 'AliveSeen' as const, data: { node: 'x', seenAt: `2024-01-01T00:00:0${i}.000Z` } });
  try {
    await a.append([{ stream: 'node-x', expected: 'no_stream', events: [ev(0)] }]);
    await b.append([{ stream: 'node-x', expected: 0n, events: [ev(1)] }]);
    // a's own view of node-x is stale now; it must notice b's commit, not reuse revision 1
    const r = await a.append([{ stream: 'node-x', expected: 1n, events: [ev(2)] }]);
    assert.equal(r.streams[0]!.nextExpected, 2n);
    await assert.rejects(a.append([{ stream: 'node-x', expected: 1n, events: [ev(3)] }]), (err: unknown) =>
      isConvergeError(err, 'CONVERGE_ERR_WRONG_EXPECTED_REVISION'),
    );
    assert.deepEqual(
      (await b.readStream('node-x')).map((e) => e.id),
      ids.slice(0, 3),
    );
  } finally {
    await a.close();
    await b.close();
  }
});

const v1Schema = `
CREATE TABLE events (position INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, stream TEXT NOT NULL,
  revision INTEGER NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL, metadata TEXT NOT NULL, UNIQUE (stream, revision));
CREATE TABLE checkpoints (name TEXT PRIMARY KEY, position INTEGER NOT NULL) WITHOUT ROWID;`;

test('a schema v1 file is migrated to the current version in place: the declaration indexes are added, events and checkpoints kept', async () => {
  const path = fresh();
  const db = new Database(path);
  db.exec(v1Schema);
  db.pragma('application_id = 1129207367'); // 'CNVG'
  db.pragma('user_version = 1');
  const insert = db.prepare('INSERT INTO events (id, stream, revision, type, data, metadata) VALUES (?, ?, ?, ?, ?, ?)');
  const ids = batchEventIds('v1', 0);
  insert.run(ids[0], 'node-x', 0, 'AliveSeen', '{"node":"x","seenAt":"2024-01-01T00:00:00.000Z"}', '{"v":1}');
  db.prepare('INSERT INTO checkpoints (name, position) VALUES (?, ?)').run('relay', 1);
  db.close();

  const store = createSqliteEventStore(path);
  try {
    assert.deepEqual(
      (await store.readStream('node-x')).map((e) => e.id),
      [ids[0]],
    );
    assert.equal(await store.getCheckpoint('relay'), 1n);
  } finally {
    await store.close();
  }
  const after = new Database(path, { readonly: true });
  try {
    // On to the latest version (v4 adds the audit tree, test/store/auditTree.test.ts).
    assert.equal(after.pragma('user_version', { simple: true }), sqliteSchemaVersion);
    const find = after
      .prepare(
        "EXPLAIN QUERY PLAN SELECT json_extract(data, '$.serial') FROM events WHERE type = 'DeclarationSent' AND stream = ? AND json_extract(data, '$.digest') = ? AND position <= ? ORDER BY position DESC LIMIT 1",
      )
      .all('node-x', 'a', 10) as { detail: string }[];
    assert.match(find.map((p) => p.detail).join('; '), /events_sent_digest/, 'findSend reads the index of sends by digest');
    const plan = after
      .prepare("EXPLAIN QUERY PLAN SELECT * FROM events WHERE type = 'DeclarationSent' AND position > ? ORDER BY position LIMIT ?")
      .all(0, 10) as { detail: string }[];
    assert.match(plan.map((p) => p.detail).join('; '), /events_declarations/);
  } finally {
    after.close();
  }
});

/** A DeclarationSent for `node` with placeholder bytes: the filtered-subscription tests need its type, not its contents. */
const declarationOf = (id: string, node: string) => ({
  id,
  type: 'DeclarationSent' as const,
  data: {
    node,
    serial: 1,
    digest: 'a'.repeat(64),
    specDigest: 'b'.repeat(64),
    declaration: 'e30=',
    signature: 'c2ln',
    keyId: 'k',
    resourceIds: [],
    sentAt: '2024-01-01T00:00:01.000Z',
  },
});

test('a DeclarationSent-only subscription is served from the index: it never reads, so never decodes, the other rows', async () => {
  const path = fresh();
  const store = createSqliteEventStore(path);
  const ids = batchEventIds('filter', 0);
  const declaration = declarationOf(ids[1]!, 'x');
  await store.append([{ stream: 'node-x', expected: 'no_stream', events: [declaration] }]);
  // A report row no decoder accepts: a subscription that read it would fail on it and retry forever.
  const raw = new Database(path);
  raw
    .prepare('INSERT INTO events (id, stream, revision, type, data, metadata) VALUES (?, ?, ?, ?, ?, ?)')
    .run(ids[2], 'node-x', 1, 'ReportReceived', '{"not":"a report"}', '{"v":2}');
  raw.close();
  const seen: Recorded[] = [];
  const errors: unknown[] = [];
  const sub = store.subscribe({
    types: ['DeclarationSent'],
    handler: (ev) => void seen.push(...ev),
    onError: (err) => void errors.push(err),
  });
  try {
    await until('the subscription to catch up', () => sub.isCaughtUp());
    assert.deepEqual(
      seen.map((e) => e.id),
      [declaration.id],
    );
    assert.deepEqual(errors, []);
  } finally {
    await sub.stop();
    await store.close();
  }
});

test('a subscriber behind the window of recent appends reads the older events from the file, with no gap or duplicate at the seam', async () => {
  const path = fresh();
  const store = createSqliteEventStore(path);
  // 600 batches of 20 events (12,000): more than this handle keeps of its own appends.
  const want: string[] = [];
  for (let b = 0; b < 600; b++) {
    await store.append(batchWrites('seam', b));
    want.push(...batchEventIds('seam', b));
  }
  const seen: string[] = [];
  const sub = store.subscribe({ batchSize: 333, handler: (ev) => void seen.push(...ev.map((e) => e.id)) });
  try {
    // and a few more while it catches up, which arrive through the window
    for (let b = 600; b < 620; b++) {
      await store.append(batchWrites('seam', b));
      want.push(...batchEventIds('seam', b));
    }
    await until('every event', () => seen.length >= want.length);
    // Batch ids are sorted within a write by stream, as they are stored.
    assert.deepEqual(seen, want);
  } finally {
    await sub.stop();
    await store.close();
  }
});

// Decoding is synchronous, so a read of 1,000 wide reports (130 KB each) held the event
// loop for seconds; and a subscription's batches settled as microtasks, so catching up ran in one turn.
test('reads and subscription batches hand over at most readBatchBytes of stored JSON (and at least one event)', async () => {
  const path = fresh();
  const store = createSqliteEventStore(path, { readBatchBytes: 150_000 });
  const failed = Object.fromEntries(Array.from({ length: 5_000 }, (_, i) => [`resource-${i}`, 'pull denied']));
  for (let i = 0; i < 5; i++) {
    const e = makeReportReceived(
      { node: 'wide', applied: [], failed, refused: '', carried: [], declared: null },
      Buffer.from(`b${i}`),
      { messageId: `m${i}`, redelivered: false, userId: 'wide' },
      new Date('2026-11-30T10:00:00Z'),
    );
    await store.append([{ stream: streamOf('wide'), expected: 'any', events: [e] }]);
  }
  const sizes: number[] = [];
  for await (const batch of store.readAll()) sizes.push(batch.length);
  assert.deepEqual(sizes, [2, 2, 1]);
  // Another handle (another engine process, or this one restarted) reads them from the file.
  const reader = createSqliteEventStore(path, { readBatchBytes: 150_000 });
  const handled: number[] = [];
  await new Promise<void>((resolve) => {
    const sub = reader.subscribe({
      handler: (events) => void handled.push(events.length),
      onCaughtUp: () => void sub.stop().then(resolve),
    });
  });
  assert.deepEqual(handled, [2, 2, 1]);
  await reader.close();
  await store.close();
});

test('a subscription catching up gives the event loop a turn between batches', async () => {
  const store = createSqliteEventStore(fresh());
  for (let i = 0; i < 10; i++)
    await store.append([
      { stream: streamOf('n'), expected: 'any', events: [makeAliveSeen({ node: 'n' }, new Date(Date.UTC(2026, 10, 30, 10, 0, i)))] },
    ]);
  let turns = 0;
  const ticker = setInterval(() => turns++, 0);
  const seen: number[] = [];
  await new Promise<void>((resolve) => {
    const sub = store.subscribe({
      batchSize: 2,
      handler: () => {
        seen.push(turns);
        // Spin past the timer's due time, so only a new loop turn lets it run.
        const spinUntil = Date.now() + 3;
        while (Date.now() < spinUntil);
      },
      onCaughtUp: () => void sub.stop().then(resolve),
    });
  });
  clearInterval(ticker);
  assert.equal(seen.length, 5);
  for (let i = 1; i < seen.length; i++)
    assert.ok(seen[i]! > seen[i - 1]!, `timers ran between batch ${i} and ${i + 1}: ${seen.join(', ')}`);
  await store.close();
});

test('readAll by stream prefix: a rare prefix (read through the stream index) and a common one (a scan) give the same events in position order', async () => {
  const store = createSqliteEventStore(fresh());
  try {
    const alives = (from: number, count: number) =>
      Array.from({ length: count }, (_, i) => ({
        stream: streamOf(`n${(from + i) % 3_000}`),
        expected: 'any' as const,
        events: [makeAliveSeen({ node: `n${(from + i) % 3_000}` }, new Date(Date.UTC(2026, 10, 30, 10, 0, 0, from + i)))],
      }));
    const paused = (rollout: string, revision: bigint) =>
      makeRolloutEvent('RolloutPaused', { rollout, by: 'op', reason: 'test', at: '2026-11-30T10:00:00.000Z' }, { revision });
    // More node events than the rare-prefix threshold (10,000), with rollout events among them.
    await store.append(alives(0, 6_000));
    await store.append([{ stream: 'rollout-a', expected: 'any', events: [paused('a', 0n)] }]);
    await store.append([{ stream: 'rollout-b', expected: 'any', events: [paused('b', 0n)] }]);
    await store.append(alives(6_000, 6_000));
    await store.append([{ stream: 'rollout-a', expected: 'any', events: [paused('a', 1n)] }]);
    const all: Recorded[] = [];
    for await (const batch of store.readAll()) all.push(...batch);
    const read = async (opts: Parameters<typeof store.readAll>[0]): Promise<Recorded[]> => {
      const out: Recorded[] = [];
      for await (const batch of store.readAll(opts)) out.push(...batch);
      return out;
    };
    const positions = (es: readonly Recorded[]) => es.map((e) => e.position);
    const expect = (prefix: string, after = 0n) => positions(all.filter((e) => e.stream.startsWith(prefix) && e.position > after));

    const rollouts = await read({ streamPrefix: 'rollout-' });
    assert.equal(rollouts.length, 3);
    assert.deepEqual(positions(rollouts), expect('rollout-'));
    assert.deepEqual(
      positions(await read({ streamPrefix: 'rollout-', after: rollouts[0]!.position })),
      expect('rollout-', rollouts[0]!.position),
    );
    assert.deepEqual(positions(await read({ streamPrefix: 'rollout-a' })), expect('rollout-a'));
    assert.deepEqual(positions(await read({ streamPrefix: 'node-' })), expect('node-'));
    assert.deepEqual(positions(await read({ streamPrefix: 'node-n12' })), expect('node-n12'), 'a rare prefix among node streams');
    assert.deepEqual(positions(await read({ streamPrefix: 'rollout-', limit: 2 })), expect('rollout-').slice(0, 2));
    assert.deepEqual(await read({ streamPrefix: 'nothing-' }), []);
  } finally {
    await store.close();
  }
});

test('a subscription filtered by type moves past events that do not match, so a wake does not scan them again', async () => {
  const store = createSqliteEventStore(fresh());
  const seen: Recorded[] = [];
  const sub = store.subscribe({ types: ['DeclarationSent'], handler: (events) => void seen.push(...events) });
  try {
    for (let i = 0; i < 3; i++)
      await store.append([
        { stream: streamOf('n'), expected: 'any', events: [makeAliveSeen({ node: 'n' }, new Date(Date.UTC(2026, 10, 30, 10, 0, i)))] },
      ]);
    const head = await store.headPosition();
    await until('the filtered subscription stands at the head', () => sub.position() === head);
    assert.deepEqual(seen, []);
  } finally {
    await sub.stop();
    await store.close();
  }
});

test("a type-filtered subscription served from its handle's own appends still sees what another handle appended between or after them", async () => {
  const path = fresh();
  const a = createSqliteEventStore(path, { pollMs: 60_000 });
  const b = createSqliteEventStore(path, { pollMs: 60_000 });
  const ids = batchEventIds('typed-tail', 0);
  let k = 0;
  const declaration = (node: string) => declarationOf(ids[k++]!, node);
  let second = 0;
  const alive = (node: string) => makeAliveSeen({ node }, new Date(Date.UTC(2026, 10, 30, 10, 0, second++)));
  const seen: Recorded[] = [];
  const sub = a.subscribe({ types: ['DeclarationSent'], handler: (events) => void seen.push(...events) });
  const settled = async (): Promise<void> => {
    const head = await a.headPosition();
    await until('the filtered subscription stands at the head', () => sub.position() === head);
  };
  try {
    await a.append([{ stream: streamOf('a0'), expected: 'any', events: [alive('a0'), declaration('a0')] }]); // from a's own appends
    await settled();
    await b.append([{ stream: streamOf('b1'), expected: 'any', events: [declaration('b1')] }]); // after a's newest
    await settled();
    await a.append([{ stream: streamOf('a1'), expected: 'any', events: [alive('a1'), declaration('a1')] }]);
    await settled();
    await b.append([{ stream: streamOf('b2'), expected: 'any', events: [declaration('b2')] }]);
    await a.append([{ stream: streamOf('a2'), expected: 'any', events: [declaration('a2'), alive('a2')] }]); // after a gap in a's appends
    await settled();
    assert.deepEqual(
      seen.map((e) => [e.stream, e.position]),
      [
        ['node-a0', 2n],
        ['node-b1', 3n],
        ['node-a1', 5n],
        ['node-b2', 6n],
        ['node-a2', 7n],
      ],
    );
  } finally {
    await sub.stop();
    await a.close();
    await b.close();
  }
});
