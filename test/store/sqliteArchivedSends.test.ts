import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import { archiveSqliteStore } from '../../src/store/sqlite/sqliteArchive.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { dayMs } from '../support/archivableFleet.ts';
import { classesOfReports } from '../support/archivedSendReports.ts';
import { historyInStore } from '../support/history.ts';

// findSend over archived history (docs/operations.md "Retention and archive"): a send moved to the
// archive was still sent, so a report naming it is stale, never unknown. The move records each
// archived send in `archived_sends` in its own transaction; a store whose segments were archived
// before that table existed (schema v6) has them indexed by the next archive run.

const dir = mkdtempSync(join(tmpdir(), 'converge-archived-sends-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const never = 'e'.repeat(64);

/** d1..d5 to node `slow`: d1..d3 sixty days ago (archived), d4 and d5 a day ago (hot). */
async function fiveSends(path: string): Promise<{ digests: string[]; archive: string }> {
  const store = createSqliteEventStore(path);
  const h = historyInStore(store, Date.now() - 60 * dayMs);
  const digests: string[] = [];
  for (let i = 0; i < 5; i++) {
    if (i === 3) h.tick(59 * dayMs);
    digests.push((await h.send('slow', [{ id: `r${i}` }])).digest);
    h.tick(60_000);
    await h.alive('slow');
    h.tick(60_000);
  }
  const below = (await store.headPosition())! + 1n;
  await store.close();
  const archive = join(path + '-archive');
  const r = await archiveSqliteStore(path, { dir: archive, before: new Date(Date.now() - 30 * dayMs).toISOString(), belowPosition: below });
  assert.ok(r.events >= 3, 'the three old sends left the hot store');
  const db = new Database(path, { readonly: true });
  try {
    const hot = db.prepare("SELECT count(*) FROM events WHERE type = 'DeclarationSent'").pluck().get();
    assert.equal(hot, 2, 'd4 and d5 stay hot');
  } finally {
    db.close();
  }
  return { digests, archive };
}

test('findSend answers for a send moved to the archive, and null only for a digest never sent', async () => {
  const path = join(dir, 'find.db');
  const { digests } = await fiveSends(path);
  const store = createSqliteEventStore(path);
  try {
    assert.equal((await store.findSend('slow', digests[1]!))?.serial, 2, 'd2, archived');
    assert.equal((await store.findSend('slow', digests[0]!))?.serial, 1, 'd1, archived');
    assert.equal((await store.findSend('slow', digests[3]!))?.serial, 4, 'd4, hot');
    assert.equal(await store.findSend('slow', never), null);
    assert.equal(await store.findSend('other', digests[1]!), null, 'sent to another node only');
  } finally {
    await store.close();
  }
});

test('through ingest and the fold: a report naming archived d2 is stale, one naming a digest never sent unknown', async () => {
  const path = join(dir, 'ingest.db');
  const { digests } = await fiveSends(path);
  const store = createSqliteEventStore(path);
  try {
    assert.deepEqual(await classesOfReports(store, 'slow', [digests[1]!, never]), [
      ['stale', 2],
      ['unknown', null],
    ]);
  } finally {
    await store.close();
  }
});

test('a v6 store with segments already archived: findSend refuses a miss until the next archive run indexes them', async () => {
  const path = join(dir, 'v6.db');
  const { digests, archive } = await fiveSends(path);
  // Back to v6 as a store archived by the Converge before v7 was: no archived_sends, no `sends`.
  const db = new Database(path);
  db.exec('DROP TABLE archived_sends; ALTER TABLE archive_segments DROP COLUMN sends');
  db.pragma('user_version = 6');
  db.close();

  const store = createSqliteEventStore(path);
  try {
    assert.equal((await store.findSend('slow', digests[3]!))?.serial, 4, 'a hot send is found as before');
    await assert.rejects(store.findSend('slow', digests[1]!), /not indexed yet/, 'a miss is not "never sent" while segments are unindexed');
  } finally {
    await store.close();
  }
  const r = await archiveSqliteStore(path, { dir: archive, before: new Date(Date.now() - 30 * dayMs).toISOString(), belowPosition: 1n });
  assert.equal(r.events, 0);
  assert.equal(r.indexedSends.length, 1, 'the one old segment indexed');
  const again = createSqliteEventStore(path);
  try {
    assert.equal((await again.findSend('slow', digests[1]!))?.serial, 2);
    assert.equal(await again.findSend('slow', never), null);
  } finally {
    await again.close();
  }
});
