import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import Database from 'better-sqlite3';
import { archiveSqliteStore } from '../../src/store/sqlite/sqliteArchive.ts';
import { writeServeSnapshot } from './serveSnapshot.ts';

// `converge replay --verify` as a person runs it, for bench/replay: the built CLI (a child process)
// over a SQLite file, its time, CPU and peak RSS; and the same over a copy of the file whose history
// was moved to the archive first, as `serve --retain` leaves a long-lived store.

export type CliRun = Readonly<{ sec: number; cpuSec: number; rssMiB: number; stdout: string }>;

const bin = new URL('../../bin/converge.js', import.meta.url).pathname;
const dist = new URL('../../dist/src/cli/main.js', import.meta.url).pathname;

/** Whether the CLI is built (npm run build): without it nothing here runs. */
export const cliBuilt = (): boolean => existsSync(dist);

/** `converge replay --verify --store sqlite:<path>` plus `args`; throws unless it exits 0. */
export function cliReplayVerify(path: string, args: readonly string[] = []): CliRun {
  const usage = 'data:text/javascript,process.on("exit",()=>process.stderr.write("\\nrusage "+JSON.stringify(process.resourceUsage())))';
  const start = performance.now();
  const r = spawnSync(process.execPath, ['--import', usage, bin, 'replay', '--verify', '--store', `sqlite:${path}`, ...args], {
    encoding: 'utf8',
    env: { ...process.env, CONVERGE_LOG_LEVEL: 'warn' },
  });
  const sec = (performance.now() - start) / 1000;
  const line = /rusage (\{.*\})/.exec(r.stderr ?? '');
  if (r.status !== 0 || line === null) throw new Error(`converge replay --verify failed (${r.status}): ${r.stderr}`);
  const u = JSON.parse(line[1]!) as { maxRSS: number; userCPUTime: number; systemCPUTime: number };
  return { sec, cpuSec: (u.userCPUTime + u.systemCPUTime) / 1e6, rssMiB: u.maxRSS / 1024, stdout: r.stdout };
}

export type ArchivedReplay = CliRun & Readonly<{ archived: number; segments: number; archiveSec: number }>;

/**
 * A copy of the store at `path` in `copy`, a snapshot written beside it as serve writes one, every
 * node event below it moved to segments in `archiveDir` (all of them are older than now), then
 * `replay --verify` over the hot store and the archive.
 */
export async function replayVerifyArchived(path: string, copy: string, archiveDir: string): Promise<ArchivedReplay> {
  const db = new Database(path, { readonly: true });
  db.prepare('VACUUM INTO ?').run(copy);
  db.close();
  const below = (await writeServeSnapshot(copy, `${copy}.snapshot`))!;
  const t = performance.now();
  const moved = await archiveSqliteStore(copy, { dir: archiveDir, before: new Date().toISOString(), belowPosition: below });
  const archiveSec = (performance.now() - t) / 1000;
  const run = cliReplayVerify(copy, ['--archive-dir', archiveDir]);
  if (!/no difference/i.test(run.stdout)) throw new Error(`replay --verify over the archive found a difference: ${run.stdout}`);
  return { ...run, archived: moved.events, segments: moved.segments.length, archiveSec };
}
