import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import pg from 'pg';
import { createPostgresEventStore } from '../../src/store/postgres/index.ts';
import { archivableFleet, archivableFleetIn } from '../support/archivableFleet.ts';
import { cliIn } from '../support/cliInProcess.ts';
import { describeOnPostgres, scratchSchema } from '../support/postgres.ts';

// docs/operations.md "Retention and archive", on SQLite and on PostgreSQL alike: the reads give the
// same answers before and after the move when given the archive, and audit verify walks the archive
// and names a segment that is gone or changed by its positions.

/** A store with archivable history, as the CLI names it, and how many events its table still holds. */
type FleetStore = Readonly<{
  args: readonly string[];
  /** The store's arguments once its snapshot is moved away (PostgreSQL names its snapshot file apart). */
  liveArgs: readonly string[];
  snapshot: string;
  snapshotPosition: bigint;
  /** Events in the store's table, and its head position. */
  counts: () => Promise<{ hot: number; head: number }>;
  /** Set the first root of the summary the store keeps of segment `file` (not its header's) to `root`, hex; returns the one it held. */
  setStoredRoot: (file: string, root: string) => Promise<string>;
}>;

function archiveReadsSuite(dir: string, fleet: () => Promise<FleetStore>): void {
  test('history, state --at, forensics, replay --verify, audit verify and status answer the same before and after archiving', async () => {
    const { args: store, liveArgs, snapshot, snapshotPosition, counts, setStoredRoot } = await fleet();
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
        // status says how long a silent node has been silent, by the clock: the one field that moves.
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
    assert.ok(summary.segmentBytes < summary.storedBytes, 'compressed smaller than stored');
    assert.deepEqual(readdirSync(join(dir, 'archive')), summary.files);

    // The rows left the store's table: the answers below come from the segment.
    const { hot: left, head } = await counts();
    assert.equal(left + summary.events, head, 'each event in the store or the archive');

    assert.deepEqual(await answers(archive), before, 'the same answers read through the archive');

    // Without the archive the history is shorter: the test reads the archive, not a store that kept everything.
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
    assert.equal(s.archive.bytes, summary.segmentBytes);

    // replay --verify against the live path (no snapshot): both folds read through the archive.
    renameSync(snapshot, `${snapshot}.kept`);
    const live = await cliIn(dir, ['replay', '--verify', '--json', ...liveArgs, ...archive]);
    assert.equal(live.code, 0, live.stdout + live.stderr);
    assert.match(live.stdout, /"verified":true,"nodes":3,"against":"the live projection path/);
    renameSync(`${snapshot}.kept`, snapshot);

    // A second run finds nothing more to move and changes nothing.
    const again = await cliIn(dir, ['store', 'archive', '--older-than', '30d', ...archive, ...store, '--json']);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(JSON.parse(again.stdout).events, 0);
    assert.deepEqual(await answers(archive), before);

    // The segment's summary of its leaf range (docs/audit.md "Proofs without the whole log"), an
    // optional field of the v2 header: one root changed, the header rewritten (its sha256 covers
    // the block table, so the manifest needs no change), and audit verify names the segment.
    const file = join(dir, 'archive', summary.files[0]);
    const range = /events-0*(\d+)-0*(\d+)/.exec(summary.files[0])!;
    const original = readFileSync(file);
    const nl = original.indexOf(10);
    const header = JSON.parse(original.subarray(0, nl).toString('utf8'));
    assert.equal(header.version, 2, 'still version 2: the release before refuses any other');
    assert.equal(header.tree.first, 0, 'the first segment of a store starts at its first leaf');
    assert.ok(header.tree.end > header.tree.first && Array.isArray(header.tree.foreign));
    const flip = (h: string): string => (h[0] === '0' ? '1' : '0') + h.slice(1);
    header.tree.roots[header.tree.roots.length - 1] = flip(header.tree.roots.at(-1));
    writeFileSync(file, Buffer.concat([Buffer.from(JSON.stringify(header)), original.subarray(nl)]));
    const forged = await cliIn(dir, ['audit', 'verify', ...store, ...archive]);
    assert.equal(forged.code, 1, forged.stdout + forged.stderr);
    assert.match(
      forged.stdout,
      new RegExp(`TAMPERED archive summary at positions ${range[1]}-${range[2]}: segment ${summary.files[0]}: its root \\d+ of \\d+`),
    );
    const forgedJson = JSON.parse((await cliIn(dir, ['audit', 'verify', ...store, ...archive, '--json'])).stdout);
    assert.equal(forgedJson.finding.kind, 'summary');
    assert.equal(forgedJson.finding.segment, summary.files[0]);
    writeFileSync(file, original);
    assert.equal((await cliIn(dir, ['audit', 'verify', ...store, ...archive])).code, 0, 'intact again with the header as written');
    // The store's own copy of the summary, which export reads instead of the header, is checked as well.
    const root = await setStoredRoot(summary.files[0], flip(header.tree.roots[0]));
    const storedForged = await cliIn(dir, ['audit', 'verify', ...store, ...archive]);
    assert.equal(storedForged.code, 1, storedForged.stdout + storedForged.stderr);
    assert.match(
      storedForged.stdout,
      new RegExp(
        `TAMPERED archive summary at positions ${range[1]}-${range[2]}: segment ${summary.files[0]}: the store's copy of its summary: its root 1 of \\d+`,
      ),
    );
    await setStoredRoot(summary.files[0], root);
    assert.equal((await cliIn(dir, ['audit', 'verify', ...store, ...archive])).code, 0, "intact again with the store's copy as written");

    // A changed segment, then a missing one: audit verify names the positions and the kind.
    renameSync(file, `${file}.kept`);
    const missing = await cliIn(dir, ['audit', 'verify', ...store, ...archive]);
    assert.equal(missing.code, 1, missing.stderr);
    assert.match(missing.stdout, new RegExp(`TAMPERED archive at positions ${range[1]}-${range[2]} \\(missing\\)`));
    writeFileSync(file, Buffer.from('not a segment'));
    const changed = await cliIn(dir, ['audit', 'verify', ...store, ...archive, '--json']);
    assert.equal(changed.code, 1);
    assert.equal(JSON.parse(changed.stdout).archive[0].problem, 'changed');
  });
}

describe('store archive on a SQLite store', () => {
  const dir = mkdtempSync(join(tmpdir(), 'converge-archive-cli-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  archiveReadsSuite(dir, async () => {
    const path = join(dir, 'fleet.db');
    const { snapshotPosition } = await archivableFleet(path);
    const counts = async () => {
      const db = new Database(path, { readonly: true });
      try {
        const r = db.prepare('SELECT count(*) AS hot, max(position) AS head FROM events').get() as { hot: number; head: number };
        return { hot: r.hot, head: r.head };
      } finally {
        db.close();
      }
    };
    const setStoredRoot = async (file: string, root: string) => {
      const db = new Database(path);
      try {
        const held = db.prepare('SELECT roots FROM archive_segment_summaries WHERE file = ?').pluck().get(file) as Buffer;
        db.prepare('UPDATE archive_segment_summaries SET roots = ? WHERE file = ?').run(
          Buffer.concat([Buffer.from(root, 'hex'), held.subarray(32)]),
          file,
        );
        return held.subarray(0, 32).toString('hex');
      } finally {
        db.close();
      }
    };
    const args = ['--store', `sqlite:${path}`];
    return { args, liveArgs: args, snapshot: `${path}.snapshot`, snapshotPosition, counts, setStoredRoot };
  });

  test('store archive refuses a store without a snapshot and a store that does not archive, saying why', async () => {
    const path = join(dir, 'nosnap.db');
    await archivableFleet(path);
    rmSync(`${path}.snapshot`);
    const r = await cliIn(dir, ['store', 'archive', '--older-than', '30d', '--archive-dir', join(dir, 'a2'), '--store', `sqlite:${path}`]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /no snapshot/);
    const esdb = await cliIn(dir, [
      'store',
      'archive',
      '--older-than',
      '30d',
      '--archive-dir',
      join(dir, 'a3'),
      '--store',
      'esdb://127.0.0.1:1?tls=false',
    ]);
    assert.equal(esdb.code, 2);
    assert.match(esdb.stderr, /not supported for a esdb store; SQLite and PostgreSQL/);
  });
});

describeOnPostgres('store archive on a PostgreSQL store', () => {
  const dir = mkdtempSync(join(tmpdir(), 'converge-archive-pg-cli-'));
  const scratch = scratchSchema('converge_pgarchive_cli');
  after(async () => {
    await scratch.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  archiveReadsSuite(dir, async () => {
    const snapshot = join(dir, 'fleet.snapshot');
    const { snapshotPosition } = await archivableFleetIn(createPostgresEventStore(scratch.url), snapshot);
    const counts = async () => {
      const client = new pg.Client({ connectionString: scratch.url.replace(/\?.*$/, '') });
      await client.connect();
      try {
        const hot = await client.query(`SELECT count(*)::int AS n FROM ${scratch.schema}.events`);
        const head = await client.query(`SELECT position::int AS n FROM ${scratch.schema}.head`);
        return { hot: hot.rows[0].n as number, head: head.rows[0].n as number };
      } finally {
        await client.end();
      }
    };
    const setStoredRoot = async (file: string, root: string) => {
      const client = new pg.Client({ connectionString: scratch.url.replace(/\?.*$/, '') });
      await client.connect();
      try {
        const table = `${scratch.schema}.archive_segment_summaries`;
        const held = (await client.query(`SELECT roots FROM ${table} WHERE file = $1`, [file])).rows[0].roots as Buffer;
        await client.query(`UPDATE ${table} SET roots = $1 WHERE file = $2`, [
          Buffer.concat([Buffer.from(root, 'hex'), held.subarray(32)]),
          file,
        ]);
        return held.subarray(0, 32).toString('hex');
      } finally {
        await client.end();
      }
    };
    return {
      args: ['--store', scratch.url, '--snapshot', snapshot],
      liveArgs: ['--store', scratch.url],
      snapshot,
      snapshotPosition,
      counts,
      setStoredRoot,
    };
  });
});
