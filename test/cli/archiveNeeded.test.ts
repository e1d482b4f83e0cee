import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { archivableFleet } from '../support/archivableFleet.ts';
import { cliIn } from '../support/cliInProcess.ts';

// docs/operations.md "Retention and archive", "Reads without the archive": once history is
// archived, a read that folds a node's history from its first event, or the whole log from
// position zero, refuses without --archive-dir (exit 2, naming what was moved) instead of
// answering from the kept rows alone; with it, it answers as it did before the move. A read the
// hot store answers (store stats, the rollouts) still answers.

const dir = mkdtempSync(join(tmpdir(), 'converge-archive-needed-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const refusal = /the store moved \d+ events to 1 archive segment\(s\); give --archive-dir <dir> so they are read too/;

test('the reads of the past refuse without --archive-dir once history is archived, and answer as before with it', async () => {
  const path = join(dir, 'fleet.db');
  const { snapshotPosition } = await archivableFleet(path);
  const store = ['--store', `sqlite:${path}`];
  const archive = ['--archive-dir', join(dir, 'archive')];
  const mid = String(snapshotPosition / 3n);
  const reads: string[][] = [
    ['history', 'n1', '--json'],
    ['history', 'n3', '--from', '0', '--json'],
    ['state', 'n2', '--at', mid, '--json'],
    ['status', 'n3', '--json'],
    ['status', '--json'],
    ['forensics', 'races', '--json'],
    ['replay', '--verify', '--json'],
  ];
  const exported = (name: string) => ['audit', 'export', 'n1', '--at', mid, '--unsigned', '--out', join(dir, name)];
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
  assert.equal((await cliIn(dir, [...exported('before.json'), ...store])).code, 0);

  const moved = await cliIn(dir, ['store', 'archive', '--older-than', '30d', ...archive, ...store, '--json']);
  assert.equal(moved.code, 0, moved.stderr);
  const { events } = JSON.parse(moved.stdout) as { events: number };
  const named = new RegExp(`the store moved ${events} events to 1 archive segment\\(s\\); give --archive-dir`);

  for (const args of [...reads, exported('without.json')]) {
    const r = await cliIn(dir, [...args, ...store]);
    assert.equal(r.code, 2, `${args.join(' ')} refuses without the archive: ${r.stdout}${r.stderr}`);
    assert.match(r.stderr, refusal, args.join(' '));
    assert.match(r.stderr, named, args.join(' '));
    assert.doesNotMatch(r.stderr, /LOG_CHANGED|audit verify/, `${args.join(' ')}: no tamper alarm`);
  }
  // audit verify's refusal is the same one, in its own words.
  const verify = await cliIn(dir, ['audit', 'verify', ...store]);
  assert.equal(verify.code, 2);
  assert.match(
    verify.stderr,
    /audit verify: the store moved \d+ events to 1 archive segment\(s\); give --archive-dir <dir> so they are verified too/,
  );

  // replay --verify against the live path (no snapshot): refused too, not "no difference".
  renameSync(`${path}.snapshot`, `${path}.snapshot.kept`);
  const live = await cliIn(dir, ['replay', '--verify', '--json', ...store]);
  assert.equal(live.code, 2, live.stdout + live.stderr);
  assert.match(live.stderr, refusal);
  const liveArchived = await cliIn(dir, ['replay', '--verify', '--json', ...store, ...archive]);
  assert.equal(liveArchived.code, 0, liveArchived.stdout + liveArchived.stderr);
  renameSync(`${path}.snapshot.kept`, `${path}.snapshot`);

  // With the archive, the answers of before the move.
  assert.deepEqual(await answers(archive), before);
  const withArchive = await cliIn(dir, [...exported('after.json'), ...store, ...archive]);
  assert.equal(withArchive.code, 0, withArchive.stderr);
  const bundle = (name: string): unknown => ({ ...JSON.parse(readFileSync(join(dir, name), 'utf8')), exportedAt: null });
  assert.deepEqual(bundle('after.json'), bundle('before.json'));

  // What the hot store answers alone still answers.
  for (const args of [
    ['store', 'stats', '--json'],
    ['rollouts', '--json'],
    ['node', 'hold', 'n1'],
  ]) {
    const r = await cliIn(dir, [...args, ...store]);
    assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
  }
});
