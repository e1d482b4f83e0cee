import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
// @ts-expect-error -- a build script in plain JavaScript, without types.
import { gitCommit } from '../../scripts/buildInfo.mjs';

// `converge --version`: the package's version and the commit the build was made from
// (scripts/bundle.mjs writes it beside the bundle); "unknown" where there is no git clone.

const root = new URL('../../', import.meta.url).pathname;
const bin = `${root}bin/converge.js`;
const { version } = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as { version: string };

test('converge --version prints the package version and the commit of the build', () => {
  const head = spawnSync('git', ['rev-parse', 'HEAD'], { cwd: root, encoding: 'utf8' });
  const r = spawnSync(process.execPath, [bin, '--version'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const m = /^converge (\S+) \(commit (\S+)\)\n$/.exec(r.stdout);
  assert.ok(m !== null, r.stdout);
  assert.equal(m[1], version);
  // The build is of some commit of this clone (it may predate the latest commit): a full hash git knows.
  assert.match(m[2]!, /^[0-9a-f]{40}$/);
  if (head.status === 0) assert.equal(spawnSync('git', ['cat-file', '-e', m[2]!], { cwd: root }).status, 0);
  const j = spawnSync(process.execPath, [bin, '--version', '--json'], { encoding: 'utf8' });
  assert.deepEqual(JSON.parse(j.stdout), { version, commit: m[2] });
});

test('a tree that is not a git clone has commit "unknown"', () => {
  const dir = mkdtempSync(join(tmpdir(), 'converge-nogit-'));
  try {
    assert.equal(gitCommit(dir), 'unknown');
    assert.match(gitCommit(root) as string, /^[0-9a-f]{40}$/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
