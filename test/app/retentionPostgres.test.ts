import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import pg from 'pg';
import { startRetention } from '../../src/app/retention.ts';
import { loadConfig } from '../../src/app/config.ts';
import type { ConvergeError } from '../../src/core/errors.ts';
import { readSegmentFile } from '../../src/store/archive/segment.ts';
import { archivePostgresStore } from '../../src/store/postgres/postgresArchive.ts';
import { createPostgresEventStore } from '../../src/store/postgres/index.ts';
import { archivableFleetIn, dayMs } from '../support/archivableFleet.ts';
import { historyInStore } from '../support/history.ts';
import { logger } from '../support/logger.ts';
import { describeOnPostgres, postgresTestUrl, scratchSchema } from '../support/postgres.ts';
import type { ScratchSchema } from '../support/postgres.ts';

// serve --retain on a PostgreSQL store several engines share (docs/operations.md "Retention and
// archive"): every engine runs retention, the store's archive lock lets one move at a time, and
// together they move exactly what one `store archive` run moves, while appends go on.

describeOnPostgres('serve --retain on a shared PostgreSQL store', () => {
  const dir = mkdtempSync(join(tmpdir(), 'converge-pg-retention-'));
  const scratches: ScratchSchema[] = [];
  const admin = new pg.Client({ connectionString: postgresTestUrl });
  after(async () => {
    await admin.end();
    for (const s of scratches) await s.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('two engines retaining at once move each closed event once, as one run would, beside appends', async () => {
    await admin.connect();
    const [a, b] = [scratchSchema('converge_pgretain_a'), scratchSchema('converge_pgretain_b')];
    scratches.push(a, b);
    const snapshot = join(dir, 'a.snapshot');
    const { snapshotPosition } = await archivableFleetIn(createPostgresEventStore(a.url), snapshot);
    // The same events in b, for one uninterrupted run to compare with.
    const opened = createPostgresEventStore(b.url);
    await opened.headPosition();
    await opened.close();
    const cols = 'position, id, stream, revision, type, data, metadata';
    await admin.query(`INSERT INTO ${b.schema}.events (${cols}) SELECT ${cols} FROM ${a.schema}.events ORDER BY position`);
    const now = Date.now();
    const oneRun = await archivePostgresStore(b.url, {
      dir: join(dir, 'one'),
      before: new Date(now - 30 * dayMs).toISOString(),
      belowPosition: snapshotPosition,
    });

    const archiveDir = join(dir, 'shared');
    const engines = [1, 2].map(() =>
      startRetention({
        store: { kind: 'postgres', url: a.url },
        archiveDir,
        retainMs: 30 * dayMs,
        snapshotPath: snapshot,
        logger,
        now: () => now,
        segmentEvents: 10,
        pauseMs: 0,
        everyMs: 20,
      }),
    );
    // Appends go on meanwhile (above the snapshot: never archived).
    const store = createPostgresEventStore(a.url);
    const h = historyInStore(store, now);
    const idle = Promise.all(engines.map((e) => e.idle()));
    let appended = 0;
    let done = false;
    void idle.then(() => (done = true));
    while (!done || appended < 20) {
      await h.alive('n2');
      appended++;
    }
    await Promise.all(engines.map((e) => e.stop()));

    try {
      const manifest = await store.archiveManifest!();
      assert.ok(manifest.segments.every((s) => s.events <= 10));
      const archived = manifest.segments.flatMap((s) => readSegmentFile(join(archiveDir, s.file), s.file).rows.map((r) => r.position));
      assert.equal(archived.length, oneRun.events, 'the engines together moved what one run moves');
      assert.equal(new Set(archived).size, archived.length, 'no event in two segments');
      const hot = (await admin.query<{ p: string }>(`SELECT position::text AS p FROM ${a.schema}.events`)).rows.map((r) => BigInt(r.p));
      const head = (await store.headPosition())!;
      const every = [...hot, ...archived].sort((x, y) => (x < y ? -1 : 1));
      assert.deepEqual(
        every,
        Array.from({ length: Number(head) }, (_, i) => BigInt(i + 1)),
        'each event in the store or the archive, once',
      );
    } finally {
      await store.close();
    }
  });

  test('--retain on a postgres:// store needs --snapshot', () => {
    const flags = { retain: '30d', 'archive-dir': 'a', store: 'postgres://u@db/x' };
    assert.throws(
      () => loadConfig({ flags, env: {} }),
      (e: ConvergeError) => e.code === 'CONVERGE_ERR_CONFIG_INVALID' && /needs --snapshot/.test(e.message),
    );
    assert.equal(loadConfig({ flags: { ...flags, snapshot: 's' }, env: {} }).retain, 30 * dayMs);
  });
});
