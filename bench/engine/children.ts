// Child processes and /proc readings for bench/engine.ts: the serves and the baseline it starts,
// their CPU time, and the local broker's process.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { appendFileSync, readdirSync, readFileSync } from 'node:fs';
import { request } from 'node:http';
import { createInterface } from 'node:readline';

const clockTick = 100; // CLK_TCK on Linux: /proc/<pid>/stat counts CPU in 1/100 s

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** utime + stime of a process in µs (all its threads: GC, libuv pool, SQLite's writer), or of its main thread alone. */
export function cpuMicros(pid: number, mainThread = false): number {
  const stat = readFileSync(mainThread ? `/proc/${pid}/task/${pid}/stat` : `/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) / clockTick) * 1e6;
}

/** The local broker's process (RabbitMQ's Erlang VM), or null when the broker runs elsewhere: its CPU is the machine's too. */
export function findBrokerPid(): number | null {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === 'beam.smp') return Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  return null;
}

export function httpGet(url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

export type Child = Readonly<{ proc: ChildProcess; lines: AsyncIterator<string>; stop: () => Promise<void> }>;

/** The children started so far and not yet exited, for the bench to kill if it fails. */
export const children = new Set<ChildProcess>();

/** Node running `args` in `cwd`; `lines` are those of stdout or stderr, the other kept for an error. */
export function startChild(cwd: string, args: readonly string[], stdoutOrErr: 'stdout' | 'stderr'): Child {
  const proc = spawn(process.execPath, args, { cwd, stdio: ['pipe', 'pipe', 'pipe'] });
  children.add(proc);
  const out = stdoutOrErr === 'stdout' ? proc.stdout! : proc.stderr!;
  const other = stdoutOrErr === 'stdout' ? proc.stderr! : proc.stdout!;
  let tail = '';
  // e.g. BENCH_SERVE_NODE_ARGS=--trace-gc BENCH_CHILD_OUTPUT=/tmp/gc.txt: what the child prints besides its lines.
  const output = process.env['BENCH_CHILD_OUTPUT'];
  other.on('data', (c: Buffer) => {
    tail = (tail + c.toString()).slice(-4000);
    if (output !== undefined) appendFileSync(output, c);
  });
  const lines = createInterface({ input: out })[Symbol.asyncIterator]();
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  proc.once('exit', (code, signal) => {
    children.delete(proc);
    if (code !== 0 && signal === null) console.error(`child ${args.join(' ')} exited ${code}: ${tail}`);
  });
  return {
    proc,
    lines,
    stop: async () => {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      // serve stops on SIGTERM; the baseline when its stdin closes (after its last acks are flushed).
      if (stdoutOrErr === 'stderr') proc.kill('SIGTERM');
      proc.stdin?.end();
      await exited;
    },
  };
}

export async function waitForLine(lines: AsyncIterator<string>, match: RegExp): Promise<RegExpMatchArray> {
  for (;;) {
    const r = await lines.next();
    if (r.done === true) throw new Error(`child ended before printing ${match}`);
    const m = r.value.match(match);
    if (m !== null) return m;
  }
}

export const pct = (sorted: readonly number[], p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
