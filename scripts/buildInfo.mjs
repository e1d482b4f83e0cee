// What `converge --version` prints besides the package's version: the git commit the build was
// made from, written beside the bundle by scripts/bundle.mjs. A tree that is not a git clone (a
// tarball, a copy) has no commit to name: "unknown", never a guess.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** The commit HEAD names in `dir`, or "unknown" when `dir` is not in a git work tree (or git is missing). */
export function gitCommit(dir) {
  const r = spawnSync('git', ['rev-parse', '--verify', '--quiet', 'HEAD'], { cwd: dir, encoding: 'utf8' });
  const commit = r.status === 0 ? r.stdout.trim() : '';
  return /^[0-9a-f]{40,64}$/.test(commit) ? commit : 'unknown';
}

/** `{ version, commit }` of the package at `root` (a path ending in /). */
export function buildInfo(root) {
  const { version } = JSON.parse(readFileSync(`${root}package.json`, 'utf8'));
  return { version, commit: gitCommit(root) };
}
