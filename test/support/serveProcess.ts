import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';

// `converge serve` as an operator runs it: the built CLI (bin/converge.js over dist/, so `npm run
// build` first; `npm test` does) in a child process of its own, which a test can SIGKILL. Its
// JSON log lines (stderr) are kept with the moment each arrived, so a test can wait for one
// ("relay lease taken") and tell when it came.

export const thisBin = new URL('../../bin/converge.js', import.meta.url).pathname;

export type LogLine = Readonly<{ at: number; msg: string; raw: string }>;

export type ServeProcess = Readonly<{
  child: ChildProcess;
  /** The API's base URL once it listens (rejects if the process exits first). */
  url: Promise<string>;
  /** Every stderr line so far, JSON log lines with their `msg`, others with `msg` = the line. */
  lines: () => readonly LogLine[];
  /** The first line so far whose `msg` matches, or undefined. */
  logged: (msg: RegExp, since?: number) => LogLine | undefined;
  /** Resolves with the exit code and signal. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Everything it wrote to stderr (for failure messages). */
  stderr: () => string;
  /** SIGKILL and wait for the exit. */
  kill: () => Promise<void>;
  /** SIGTERM (serve writes its snapshot and closes), wait for the exit; resolves with its code. */
  stop: () => Promise<number | null>;
}>;

/**
 * Start `converge <args>` (normally `serve …`) with `env` over a clean copy of this process's;
 * `bin` runs another build (an earlier release's, ./previousRelease.ts) instead of this one's; `prefix` runs it
 * through a command that execs it (`ip netns exec <ns>`: the pid stays node's).
 */
export function startServe(
  args: readonly string[],
  env: Readonly<Record<string, string>> = {},
  bin = thisBin,
  prefix: readonly string[] = [],
): ServeProcess {
  const base: NodeJS.ProcessEnv = { ...process.env };
  // The caller says what this engine uses; nothing leaks in from the shell that runs the tests.
  for (const k of Object.keys(base)) if (k.startsWith('CONVERGE_') && k !== 'CONVERGE_DEBUG') delete base[k];
  const [command, ...rest] = [...prefix, process.execPath, bin, ...args];
  const child = spawn(command!, rest, { env: { ...base, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
  const lines: LogLine[] = [];
  let text = '';
  let partial = '';
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (chunk: string) => {
    const at = Date.now();
    text += chunk;
    partial += chunk;
    const parts = partial.split('\n');
    partial = parts.pop() ?? '';
    for (const raw of parts) {
      let msg = raw;
      if (raw.startsWith('{')) {
        try {
          msg = String((JSON.parse(raw) as { msg?: unknown }).msg ?? raw);
        } catch {
          // not a log line after all
        }
      }
      lines.push({ at, msg, raw });
    }
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const url = new Promise<string>((resolve, reject) => {
    const look = (): void => {
      const m = /converge serving on (http:\/\/\S+)/.exec(text);
      if (m !== null) {
        child.stderr!.off('data', look);
        resolve(m[1]!);
      }
    };
    child.stderr!.on('data', look);
    void exited.then(({ code, signal }) => reject(new Error(`serve exited (${code ?? signal}) before listening: ${text}`)));
  });
  url.catch(() => undefined);
  const alive = (): boolean => child.exitCode === null && child.signalCode === null;
  return {
    child,
    url,
    lines: () => lines,
    logged: (msg, since = 0) => lines.find((l) => l.at >= since && msg.test(l.msg)),
    exited,
    stderr: () => text,
    kill: async () => {
      if (alive()) child.kill('SIGKILL');
      await exited;
    },
    stop: async () => {
      if (alive()) child.kill('SIGTERM');
      return (await exited).code;
    },
  };
}
