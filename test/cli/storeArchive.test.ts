import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { cliIn } from '../support/cliInProcess.ts';
import { archivableFleet } from '../support/archivableFleet.ts';

// docs/operations.md "Retention and archive": the reads give the same answers before and after
// the move when given the archive, and audit verify walks the archive and names a segment that is
// gone or changed by its positions.

const dir = mkdtempSync(join(tmpdir(), 'converge-archive-cli-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('history, state --at, forensics, replay --verify, audit verify and status answer the same before and after archiving', async () => {
  const path = join(dir, 'fleet.db');
  const { snapshotPosition } = await archivableFleet(path);
  const store = ['--store', `sqlite:${path}`];
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

  const moved = await cliIn(dir, ['store', 'archive', '--older-than', '30d', ...archive, ...store, '--json']);
  assert.equal(moved.code, 0, moved.stderr);
  const summary = JSON.parse(moved.stdout);
  assert.ok(summary.events > 20, `most of the 80 days were archived: ${moved.stdout}`);
  assert.equal(summary.segments, 1);
  assert.ok(summary.segmentBytes < summary.storedBytes, 'compressed smaller than stored');
  assert.deepEqual(readdirSync(join(dir, 'archive')), summary.files);

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
  renameSync(`${path}.snapshot`, `${path}.snapshot.kept`);
  const live = await cliIn(dir, ['replay', '--verify', '--json', ...store, ...archive]);
  assert.equal(live.code, 0, live.stdout + live.stderr);
  assert.match(live.stdout, /"verified":true,"nodes":3,"against":"the live projection path/);
  renameSync(`${path}.snapshot.kept`, `${path}.snapshot`);

  // A second run finds nothing more to move and changes nothing.
  const again = await cliIn(dir, ['store', 'archive', '--older-than', '30d', ...archive, ...store, '--json']);
  assert.equal(JSON.parse(again.stdout).events, 0);
  assert.deepEqual(await answers(archive), before);

  // A changed segment, then a missing one: audit verify names the positions and the kind.
  const file = join(dir, 'archive', summary.files[0]);
  const range = /events-0*(\d+)-0*(\d+)/.exec(summary.files[0])!;
  renameSync(file, `${file}.kept`);
  const missing = await cliIn(dir, ['audit', 'verify', ...store, ...archive]);
  assert.equal(missing.code, 1, missing.stderr);
  assert.match(missing.stdout, new RegExp(`TAMPERED archive at positions ${range[1]}-${range[2]} \\(missing\\)`));
  writeFileSync(file, Buffer.from('not a segment'));
  const changed = await cliIn(dir, ['audit', 'verify', ...store, ...archive, '--json']);
  assert.equal(changed.code, 1);
  assert.equal(JSON.parse(changed.stdout).archive[0].problem, 'changed');
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
