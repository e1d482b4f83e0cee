import { spawn } from 'node:child_process';
import type { ChildProcessByStdio } from 'node:child_process';
import type { Readable } from 'node:stream';

// `converge serve` over a SQLite store as a child process (the built CLI, no broker), for the
// benches that time what an operator meets: it resolves with the URL serve prints once it listens;
// how the bench then waits for /readyz, and what it reads of the process, is its own.

export type ServeProcess = Readonly<{ proc: ChildProcessByStdio<null, null, Readable>; url: string; exited: Promise<void> }>;

export async function spawnServe(root: string, storePath: string, extraArgs: readonly string[] = []): Promise<ServeProcess> {
  const proc = spawn(
    process.execPath,
    ['bin/converge.js', 'serve', '--store', `sqlite:${storePath}`, '--port', '0', '--log-level', 'error', ...extraArgs],
    { cwd: root, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  let err = '';
  const url = await new Promise<string>((resolve, reject) => {
    proc.stderr.on('data', (c: Buffer) => {
      err += c.toString();
      const m = /converge serving on (\S+)/.exec(err);
      if (m !== null) resolve(m[1]!);
    });
    proc.once('exit', () => reject(new Error(`serve exited: ${err}`)));
  });
  return { proc, url, exited };
}
