import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// The release before this one, built from its commit, for the upgrade test
// (test/e2e/upgrade.e2e.test.ts, docs/operations.md "Upgrades"). There are no tags: the release
// is the commit named here, which main's history holds (CI clones it whole). The build — tsc
// and the bundle, not the dashboard (serve starts without it) — runs in a detached worktree
// removed afterwards, and what `converge` runs (bin/, dist/bundle/, package.json) is kept under
// the OS temp dir, keyed by the commit, so a second run starts at once. Its node_modules are
// this checkout's, which holds only when both package-lock.json files are the same.

/** The commit that last landed before this release: bump it when a release lands. */
export const previousRelease = '73a6540020c1f50c20929f77abc9fb00c63b314f';

const root = new URL('../../', import.meta.url).pathname;

export type PreviousRelease = Readonly<{ commit: string; bin: string; dir: string; builtNow: boolean; buildMs: number }>;

const git = (args: readonly string[], cwd = root): string => execFileSync('git', args, { cwd, encoding: 'utf8', stdio: 'pipe' });

/**
 * The built release at `commit`: `bin` is its bin/converge.js. CONVERGE_PREVIOUS_RELEASE_DIR
 * names one built elsewhere (a checkout with `npm ci && npm run build` done), when this clone
 * cannot build it.
 */
export function buildPreviousRelease(commit = previousRelease): PreviousRelease {
  const given = process.env['CONVERGE_PREVIOUS_RELEASE_DIR'];
  if (given !== undefined && given !== '') return { commit, bin: join(given, 'bin/converge.js'), dir: given, builtNow: false, buildMs: 0 };
  const dir = join(tmpdir(), `converge-release-${commit.slice(0, 12)}`);
  const done = join(dir, '.built');
  if (existsSync(done)) {
    // The checkout that built it may be gone: borrow this one's node_modules (same lock file, checked then).
    if (!existsSync(join(dir, 'node_modules/pg'))) {
      rmSync(join(dir, 'node_modules'), { force: true });
      symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'));
    }
    return { commit, bin: join(dir, 'bin/converge.js'), dir, builtNow: false, buildMs: 0 };
  }

  try {
    git(['cat-file', '-e', `${commit}^{commit}`]);
  } catch {
    throw new Error(
      `the previous release ${commit} is not in this clone's history: fetch it (git fetch --unshallow origin main), or build it elsewhere and set CONVERGE_PREVIOUS_RELEASE_DIR`,
    );
  }
  const lockThen = git(['show', `${commit}:package-lock.json`]);
  const lockNow = readFileSync(join(root, 'package-lock.json'), 'utf8');
  if (lockThen !== lockNow) {
    throw new Error(
      `the previous release ${commit} has another package-lock.json than this checkout, so it cannot borrow node_modules: check it out, run npm ci and npm run build there, and set CONVERGE_PREVIOUS_RELEASE_DIR to that folder`,
    );
  }

  const t0 = performance.now();
  const work = mkdtempSync(join(tmpdir(), 'converge-release-build-'));
  const tree = join(work, 'tree');
  git(['worktree', 'add', '--detach', tree, commit]);
  try {
    symlinkSync(join(root, 'node_modules'), join(tree, 'node_modules'));
    execFileSync(process.execPath, [join(tree, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], {
      cwd: tree,
      stdio: 'pipe',
    });
    execFileSync(process.execPath, ['scripts/bundle.mjs'], { cwd: tree, stdio: 'pipe' });
    // What `converge` runs; built aside and renamed into place, so a run cut short leaves no half of it.
    const staged = join(work, 'release');
    cpSync(join(tree, 'bin'), join(staged, 'bin'), { recursive: true });
    cpSync(join(tree, 'dist/bundle'), join(staged, 'dist/bundle'), { recursive: true });
    cpSync(join(tree, 'package.json'), join(staged, 'package.json'));
    symlinkSync(join(root, 'node_modules'), join(staged, 'node_modules'));
    writeFileSync(join(staged, '.built'), `${commit}\n`);
    rmSync(dir, { recursive: true, force: true });
    renameSync(staged, dir);
  } finally {
    try {
      git(['worktree', 'remove', '--force', tree]);
    } catch {
      rmSync(tree, { recursive: true, force: true });
      git(['worktree', 'prune']);
    }
    rmSync(work, { recursive: true, force: true });
  }
  return { commit, bin: join(dir, 'bin/converge.js'), dir, builtNow: true, buildMs: Math.round(performance.now() - t0) };
}
