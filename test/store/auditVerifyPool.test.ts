import assert from 'node:assert/strict';
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import pg from 'pg';
import { verifyLog } from '../../src/core/audit/verifyLog.ts';
import type { CheckedPage, VerifyResult } from '../../src/core/audit/verifyLog.ts';
import { pooledCheckedPages } from '../../src/store/audit/verifyPool.ts';
import { createPostgresEventStore } from '../../src/store/postgres/index.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { writeHistory } from '../support/auditHistory.ts';
import { describeOnPostgres, postgresTestUrl, scratchSchema } from '../support/postgres.ts';
import { tempDir } from '../support/tempDir.ts';

// `converge audit verify` on several threads (src/store/audit/verifyPool.ts) must say exactly what
// the walk on one thread says: the same root and roots at checkpoint sizes on an intact store, and
// the same first finding, by kind and position, on a tampered one, wherever the change falls
// against the ranges the threads read (ranges of 16 positions here, so most changes sit near an edge).

const dir = tempDir({ after }, 'converge-verify-pool-');
const pristine = join(dir, 'pristine.db');
let copies = 0;

test.before(async () => {
  const store = createSqliteEventStore(pristine);
  await writeHistory(store, 100); // 300 events
  await store.close();
});

type Outcome = Readonly<{ events: number; root: string; finding: string | null; roots: string }>;
const outcome = (r: VerifyResult): Outcome => ({
  events: r.events,
  root: r.root,
  finding: r.finding === null ? null : `${r.finding.kind}@${r.finding.position}`,
  roots: [...r.roots].map(([size, root]) => `${size}:${root.slice(0, 8)}`).join(' '),
});

async function verifyBoth(path: string, duringPool?: () => Promise<void>): Promise<{ one: Outcome; pool: Outcome }> {
  const rootsAt = new Set([0, 1, 16, 17, 100, 255, 300]);
  const store = createSqliteEventStore(path);
  try {
    const read = (after: bigint | null, limit: number) => store.readStored({ after, limit });
    const one = outcome(await verifyLog({ head: () => store.auditHead(), read }, { rootsAt, pageSize: 7 }));
    const last = await store.headPosition();
    await duringPool?.();
    const pages = (): AsyncIterable<CheckedPage> =>
      pooledCheckedPages({ url: `sqlite:${path}`, last, readTail: read, threads: 2, rangeSize: 16 });
    const pool = outcome(await verifyLog({ head: () => store.auditHead(), read, checkedPages: pages }, { rootsAt }));
    return { one, pool };
  } finally {
    await store.close();
  }
}

function tampered(sql: (db: Database.Database) => void): string {
  const path = join(dir, `c${++copies}.db`);
  copyFileSync(pristine, path);
  const db = new Database(path);
  sql(db);
  db.close();
  return path;
}

test('an intact store: the same root and checkpoint roots on two threads as on one', async () => {
  const { one, pool } = await verifyBoth(pristine);
  assert.equal(one.finding, null);
  assert.equal(one.events, 300);
  assert.deepEqual(pool, one);
});

const changes: ReadonlyArray<readonly [string, (db: Database.Database) => void, string]> = [
  [
    'a changed byte inside a range',
    (db) => db.prepare("UPDATE events SET data = replace(data, 'nginx', 'nginy') WHERE position = 40").run(),
    'changed@40',
  ],
  [
    'a changed byte on the first position of a range',
    (db) => db.prepare("UPDATE events SET data = replace(data, 'nginx', 'nginy') WHERE position = 49").run(),
    'changed@49',
  ],
  ['an event deleted at the end of a range', (db) => db.prepare('DELETE FROM events WHERE position = 48').run(), 'gap@48'],
  ['an event deleted at the start of a range', (db) => db.prepare('DELETE FROM events WHERE position = 33').run(), 'gap@33'],
  ['a whole range deleted', (db) => db.prepare('DELETE FROM events WHERE position BETWEEN 65 AND 80').run(), 'gap@65'],
  [
    'two events swapped across a range edge',
    (db) => {
      db.exec('UPDATE events SET position = -position WHERE position IN (64, 65)');
      db.exec('UPDATE events SET position = 65 WHERE position = -64');
      db.exec('UPDATE events SET position = 64 WHERE position = -65');
    },
    'moved@64',
  ],
  ['a leaf hash removed', (db) => db.prepare('UPDATE events SET leaf = NULL WHERE position = 200').run(), 'unhashed@200'],
  ['the tail truncated', (db) => db.prepare('DELETE FROM events WHERE position > 290').run(), 'truncated@291'],
];

for (const [name, change, expected] of changes) {
  test(`${name}: found where one thread finds it (${expected})`, async () => {
    const { one, pool } = await verifyBoth(tampered(change));
    assert.equal(one.finding, expected);
    assert.deepEqual(pool, one);
  });
}

test('events appended after the ranges were planned are walked on this thread and verified too', async () => {
  const path = tampered(() => {});
  const { one, pool } = await verifyBoth(path, async () => {
    const writer = createSqliteEventStore(path);
    await writeHistory(writer, 5, 1);
    await writer.close();
  });
  assert.equal(one.events, 300);
  assert.equal(pool.finding, null);
  assert.equal(pool.events, 315);
});

describeOnPostgres('audit verify on several threads over PostgreSQL', () => {
  test('each thread opens the store by its URL: the same root as one thread, and a deleted event found at its position', async () => {
    const scratch = scratchSchema();
    const store = createPostgresEventStore(scratch.url);
    try {
      await writeHistory(store, 30); // 90 events
      const read = (after: bigint | null, limit: number) => store.readStored({ after, limit });
      const walk = async (threads: number) => {
        const last = await store.headPosition();
        const pooled =
          threads > 1 ? { checkedPages: () => pooledCheckedPages({ url: scratch.url, last, readTail: read, threads, rangeSize: 16 }) } : {};
        return outcome(await verifyLog({ head: () => store.auditHead(), read, ...pooled }));
      };
      const one = await walk(1);
      assert.equal(one.finding, null);
      assert.deepEqual(await walk(2), one);
      const client = new pg.Client({ connectionString: postgresTestUrl });
      await client.connect();
      try {
        await client.query(
          `DELETE FROM ${scratch.schema}.events WHERE position = (SELECT min(position) + 40 FROM ${scratch.schema}.events)`,
        );
      } finally {
        await client.end();
      }
      const tamperedOne = await walk(1);
      assert.match(tamperedOne.finding ?? '', /^gap@/);
      assert.deepEqual(await walk(2), tamperedOne);
    } finally {
      await store.close();
      await scratch.drop();
    }
  });
});
