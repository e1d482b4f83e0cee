import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import pg from 'pg';
import { createPostgresEventStore } from '../../src/store/postgres/index.ts';
import { archivableFleetIn } from '../support/archivableFleet.ts';
import { cliIn } from '../support/cliInProcess.ts';
import { describeOnPostgres, scratchSchema } from '../support/postgres.ts';

// docs/operations.md "Retention and archive", on PostgreSQL: `store archive` moves the same closed
// history as on SQLite, the reads give the same answers before and after the move when given the
// archive, and audit verify walks the archive and calls the log intact.

describeOnPostgres('store archive on a PostgreSQL store', () => {
  const dir = mkdtempSync(join(tmpdir(), 'converge-archive-pg-cli-'));
  const scratch = scratchSchema('converge_pgarchive_cli');
  after(async () => {
    await scratch.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('history, state --at, forensics, replay --verify, audit verify and status answer the same before and after archiving', async () => {
    const snapshot = join(dir, 'fleet.snapshot');
    const { snapshotPosition } = await archivableFleetIn(createPostgresEventStore(scratch.url), snapshot);
    const store = ['--store', scratch.url, '--snapshot', snapshot];
    const archive = ['--archive-dir', join(dir, 'archive')];
    const mid = String(snapshotPosition / 3n);
    const reads: string[][] = [
      ['history', 'n1', '--json'],
      ['history', 'n3', '--json'],
      ['state', 'n2', '--at', mid, '--json'],
      ['forensics', 'races', '--json'],
      ['replay', '--verify', '--json'],
      ['audit', 'verify', '--json'],
      ['status', '--json'],
      ['status', 'n3', '--json'],
    ];
    const answers = async (extra: string[]): Promise<string[]> => {
      const out: string[] = [];
      for (const args of reads) {
        const r = await cliIn(dir, [...args, ...store, ...extra]);
        assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
        out.push(r.stdout.replace(/"disconnectedForMs":\d+/g, '"disconnectedForMs":0'));
      }
      return out;
    };
    const before = await answers([]);
    assert.match(before[5]!, /"intact":true/);

    const moved = await cliIn(dir, ['store', 'archive', '--older-than', '30d', ...archive, ...store, '--json']);
    assert.equal(moved.code, 0, moved.stderr);
    const summary = JSON.parse(moved.stdout);
    assert.ok(summary.events > 20, `most of the 80 days were archived: ${moved.stdout}`);
    assert.equal(summary.segments, 1);
    assert.deepEqual(readdirSync(join(dir, 'archive')), summary.files);

    // The rows left the store's table: the answers below come from the segment.
    const client = new pg.Client({ connectionString: scratch.url.replace(/\?.*$/, '') });
    await client.connect();
    try {
      const hot = await client.query(`SELECT count(*)::int AS n FROM ${scratch.schema}.events`);
      const head = await client.query(`SELECT position::int AS n FROM ${scratch.schema}.head`);
      assert.equal(hot.rows[0].n + summary.events, head.rows[0].n, 'each event in the store or the archive');
    } finally {
      await client.end();
    }

    assert.deepEqual(await answers(archive), before, 'the same answers read through the archive');

    const hot = await cliIn(dir, ['history', 'n1', '--json', ...store]);
    assert.ok(hot.stdout.split('\n').length < before[0]!.split('\n').length, 'the hot store alone holds less of n1');
    const unchecked = await cliIn(dir, ['audit', 'verify', ...store]);
    assert.equal(unchecked.code, 2, 'audit verify will not call a store with archived events intact without reading them');
    assert.match(unchecked.stderr, /--archive-dir/);

    const stats = await cliIn(dir, ['store', 'stats', ...store, '--json']);
    assert.equal(stats.code, 0, stats.stderr);
    const s = JSON.parse(stats.stdout);
    assert.equal(s.archive.segments, 1);
    assert.equal(s.archive.events, summary.events);

    const again = await cliIn(dir, ['store', 'archive', '--older-than', '30d', ...archive, ...store, '--json']);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(JSON.parse(again.stdout).events, 0);
    assert.deepEqual(await answers(archive), before);
  });
});
