import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import pg from 'pg';
import { isConvergeError } from '../../src/core/errors.ts';
import { archivePostgresStore } from '../../src/store/postgres/postgresArchive.ts';
import { createPostgresEventStore } from '../../src/store/postgres/index.ts';
import { dayMs } from '../support/archivableFleet.ts';
import { classesOfReports } from '../support/archivedSendReports.ts';
import { historyInStore } from '../support/history.ts';
import { describeOnPostgres, postgresTestUrl, scratchSchema } from '../support/postgres.ts';
import type { ScratchSchema } from '../support/postgres.ts';

// findSend over archived history on PostgreSQL (docs/operations.md "Retention and archive"): a send
// moved to the archive was still sent, so a report naming it is stale, never unknown; the move
// records each archived send in `archived_sends` in its own transaction. And one run at a time:
// a second run while one holds the store's archive lock is refused, not run beside it.

const never = 'e'.repeat(64);

describeOnPostgres('archived sends on a PostgreSQL store', () => {
  const dir = mkdtempSync(join(tmpdir(), 'converge-pg-archived-sends-'));
  const scratches: ScratchSchema[] = [];
  after(async () => {
    for (const s of scratches) await s.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function schemaVersion(schema: string): Promise<string | undefined> {
    const client = new pg.Client({ connectionString: postgresTestUrl });
    await client.connect();
    try {
      const r = await client.query<{ value: string }>(`SELECT value FROM ${schema}.meta WHERE key = 'schema_version'`);
      return r.rows[0]?.value;
    } finally {
      await client.end();
    }
  }

  /** d1..d5 to node `slow`: d1..d3 sixty days ago (archived), d4 and d5 a day ago (hot). */
  async function fiveSends(): Promise<{ url: string; digests: string[] }> {
    const scratch = scratchSchema('converge_pgarchive_sends');
    scratches.push(scratch);
    const store = createPostgresEventStore(scratch.url);
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
    assert.equal(await schemaVersion(scratch.schema), '5', 'a store never archived stays v5: the release before reads it');
    const r = await archivePostgresStore(scratch.url, {
      dir: join(dir, scratch.schema),
      before: new Date(Date.now() - 30 * dayMs).toISOString(),
      belowPosition: below,
    });
    assert.ok(r.events >= 3, 'the three old sends left the hot store');
    assert.equal(await schemaVersion(scratch.schema), '6', 'the first move writes v6: the release before refuses it');
    const client = new pg.Client({ connectionString: postgresTestUrl });
    await client.connect();
    try {
      const hot = await client.query(`SELECT count(*)::int AS n FROM ${scratch.schema}.events WHERE type = 'DeclarationSent'`);
      assert.equal(hot.rows[0].n, 2, 'd4 and d5 stay hot');
    } finally {
      await client.end();
    }
    return { url: scratch.url, digests };
  }

  test('findSend answers for a send moved to the archive, and null only for a digest never sent', async () => {
    const { url, digests } = await fiveSends();
    const store = createPostgresEventStore(url);
    try {
      assert.equal((await store.findSend('slow', digests[1]!))?.serial, 2, 'd2, archived');
      assert.equal((await store.findSend('slow', digests[0]!))?.serial, 1, 'd1, archived');
      assert.equal((await store.findSend('slow', digests[3]!))?.serial, 4, 'd4, hot');
      assert.equal(await store.findSend('slow', never), null);
      assert.equal(await store.findSend('other', digests[1]!), null, 'sent to another node only');
      const m = await store.archiveManifest!();
      assert.equal(m.segments.length, 1);
      assert.match(m.store, /^[0-9a-f-]{36}$/);
    } finally {
      await store.close();
    }
  });

  test('through ingest and the fold: a report naming archived d2 is stale, one naming a digest never sent unknown', async () => {
    const { url, digests } = await fiveSends();
    const store = createPostgresEventStore(url);
    try {
      assert.deepEqual(await classesOfReports(store, 'slow', [digests[1]!, never]), [
        ['stale', 2],
        ['unknown', null],
      ]);
    } finally {
      await store.close();
    }
  });

  test('a run while another holds the archive lock is refused with CONVERGE_ERR_STORE_IN_USE', async () => {
    const scratch = scratchSchema('converge_pgarchive_lock');
    scratches.push(scratch);
    const store = createPostgresEventStore(scratch.url);
    await store.headPosition();
    await store.close();
    const holder = new pg.Client({ connectionString: postgresTestUrl });
    await holder.connect();
    try {
      await holder.query('SELECT pg_advisory_lock(hashtextextended($1, 0))', [`converge-archive:${scratch.schema}`]);
      const options = { dir: join(dir, 'locked'), before: new Date().toISOString(), belowPosition: 1n };
      await assert.rejects(archivePostgresStore(scratch.url, options), (err: unknown) => isConvergeError(err, 'CONVERGE_ERR_STORE_IN_USE'));
      await holder.query('SELECT pg_advisory_unlock_all()');
      assert.equal((await archivePostgresStore(scratch.url, options)).events, 0, 'free again once the holder let go');
    } finally {
      await holder.end();
    }
  });
});
