import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { archivableFleet } from '../support/archivableFleet.ts';
import { cliIn } from '../support/cliInProcess.ts';

// An archive folder holds one store's segments (docs/operations.md "Retention and archive"). A run
// clears what an interrupted run of its own left there — segment files its manifest does not name —
// so a folder given to a second store must be refused, not cleared: the first store's segments are
// its only copy of the history they hold.

const dir = mkdtempSync(join(tmpdir(), 'converge-archive-shared-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const segments = (folder: string): string[] =>
  readdirSync(folder)
    .filter((f) => f.endsWith('.ndjson.br'))
    .sort();

test("an archive run into a folder holding another store's segments is refused and removes nothing", async () => {
  const folder = join(dir, 'archive');
  const [a, b] = [join(dir, 'a.db'), join(dir, 'b.db')];
  await archivableFleet(a);
  await archivableFleet(b);
  const first = await cliIn(dir, ['store', 'archive', '--older-than', '30d', '--archive-dir', folder, '--store', `sqlite:${a}`]);
  assert.equal(first.code, 0, first.stderr);
  const ofA = segments(folder);
  assert.ok(ofA.length > 0, 'store a archived at least one segment');

  const head = async (path: string): Promise<bigint | null> => {
    const s = createSqliteEventStore(path);
    try {
      let n = 0n;
      for await (const batch of s.readAll({})) n += BigInt(batch.length);
      return n;
    } finally {
      await s.close();
    }
  };
  const hotBefore = await head(b);
  const second = await cliIn(dir, ['store', 'archive', '--older-than', '30d', '--archive-dir', folder, '--store', `sqlite:${b}`]);
  assert.equal(second.code, 2, `the run into a's folder: ${second.stdout}${second.stderr}`);
  assert.match(second.stderr, /another store/);
  assert.match(second.stderr, new RegExp(ofA[0]!.replace(/\./g, '\\.')));
  assert.deepEqual(segments(folder), ofA, "store a's segments are all still there");
  assert.equal(await head(b), hotBefore, "store b's events are all still in its hot store");

  // Store a's reads over its archive still answer.
  const read = await cliIn(dir, ['history', 'n1', '--archive-dir', folder, '--store', `sqlite:${a}`]);
  assert.equal(read.code, 0, read.stderr);
});

test('an archive folder that is a file is refused with the reason, and nothing moves', async () => {
  const path = join(dir, 'c.db');
  await archivableFleet(path);
  const file = join(dir, 'not-a-folder');
  writeFileSync(file, 'x');
  const run = await cliIn(dir, ['store', 'archive', '--older-than', '30d', '--archive-dir', file, '--store', `sqlite:${path}`]);
  assert.equal(run.code, 2, run.stderr);
  assert.match(run.stderr, /archive folder .*not-a-folder.* is not a folder/);
  assert.doesNotMatch(run.stderr, /EEXIST|\n\s+at /);
});

test("an archive run into another folder than the store's segments are in is refused, and nothing moves", async () => {
  const path = join(dir, 'd.db');
  await archivableFleet(path);
  const first = join(dir, 'd-archive');
  const once = await cliIn(dir, ['store', 'archive', '--older-than', '60d', '--archive-dir', first, '--store', `sqlite:${path}`]);
  assert.equal(once.code, 0, once.stderr);
  assert.ok(segments(first).length > 0, 'the first run archived a segment');
  const other = join(dir, 'd-elsewhere');
  const run = await cliIn(dir, ['store', 'archive', '--older-than', '30d', '--archive-dir', other, '--store', `sqlite:${path}`]);
  assert.equal(run.code, 2, run.stdout + run.stderr);
  assert.match(run.stderr, /does not hold .* of this store's .*segment/);
  assert.deepEqual(segments(other), [], 'nothing was written to the other folder');
  // The store's archive is still whole in its folder: a read over it answers.
  const read = await cliIn(dir, ['history', 'n1', '--archive-dir', first, '--store', `sqlite:${path}`]);
  assert.equal(read.code, 0, read.stderr);
});
