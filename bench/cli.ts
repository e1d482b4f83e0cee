// CLI start-up benchmark: how long a person waits for `converge --help`,
// `converge status <node>` and `converge status` on a 10,000-node SQLite store, each beside bare
// `node -e 0` measured in the same run. Passes alternate (every case once per round, the order
// rotated each round) so a busy moment on the shared machine hits every case alike; the best of
// the passes is reported with the spread between them.
// Targets: `--help` ≤ 2× bare node start; `status <node>` under 0.3 s.
// Run: node --import tsx bench/cli.ts [--bin <path to bin/converge.js>] [--passes 15]
//   --bin runs another checkout's CLI over the same store (the "before" of a change).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { generateSigningKey } from '../src/core/declaration/index.ts';
import { makeAliveSeen, makeDeclarationSent, makeReportReceived, streamOf } from '../src/core/events/index.ts';
import { createSqliteEventStore } from '../src/store/sqlite/sqliteEventStore.ts';
import type { StreamWrite } from '../src/store/index.ts';
import { createBenchReport } from './support/report.ts';

const { values } = parseArgs({ options: { bin: { type: 'string' }, passes: { type: 'string' } } });
const bin = resolve(values.bin ?? new URL('../bin/converge.js', import.meta.url).pathname);
const passes = Number(values.passes ?? 15);
const nodes = Math.max(10, Math.round(10_000 * Number(process.env.CONVERGE_BENCH_SCALE ?? 1)));
const fmt = (n: number): string => n.toLocaleString('en-US');

/** Each node: one signed declaration, a report that matches it, one sign of life — through the project's own event constructors and store. */
async function buildStore(path: string): Promise<void> {
  const store = createSqliteEventStore(path);
  const key = generateSigningKey();
  const t0 = Date.parse('2026-11-30T08:00:00Z');
  try {
    for (let first = 0; first < nodes; first += 500) {
      const writes: StreamWrite[] = [];
      for (let i = first; i < Math.min(nodes, first + 500); i++) {
        const node = nodeId(i);
        const sent = makeDeclarationSent({
          node,
          serial: 1,
          resources: [{ id: 'web', image: 'registry.local/web:1' }],
          key,
          now: new Date(t0 + i),
        });
        const body = Buffer.from(`{"node":"${node}"}`);
        const report = makeReportReceived(
          { node, declared: sent.data.digest, applied: ['web'], failed: {}, refused: '', carried: [] },
          body,
          { messageId: `${node}/r1`, redelivered: false, userId: node },
          new Date(t0 + 60_000 + i),
        );
        const alive = makeAliveSeen({ node }, new Date(t0 + 120_000 + i));
        writes.push({ stream: streamOf(node), expected: 'any', events: [sent, report, alive] });
      }
      await store.append(writes);
    }
  } finally {
    await store.close();
  }
}

const nodeId = (i: number): string => `n${String(i).padStart(5, '0')}`;

type Case = Readonly<{ name: string; args: readonly string[] }>;

function timeOnce(c: Case, env: NodeJS.ProcessEnv): number {
  const started = performance.now();
  const r = spawnSync(process.execPath, c.args, { env, stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' });
  const ms = performance.now() - started;
  if (r.status !== 0) throw new Error(`${c.name} exited ${r.status ?? r.signal}: ${r.stderr}`);
  return ms;
}

const dir = mkdtempSync(join(tmpdir(), 'converge-bench-cli-'));
try {
  const storePath = join(dir, 'converge.db');
  const built = performance.now();
  await buildStore(storePath);
  const buildMs = performance.now() - built;
  // Only what the commands need: no CONVERGE_* of the caller's shell leaks in.
  const env = { PATH: process.env.PATH, HOME: process.env.HOME, CONVERGE_STORE: `sqlite:${storePath}` };
  const cases: Case[] = [
    { name: 'node -e 0', args: ['-e', '0'] },
    { name: 'converge --help', args: [bin, '--help'] },
    { name: `converge status <node>`, args: [bin, 'status', nodeId(Math.floor(nodes / 2))] },
    { name: `converge status (${fmt(nodes)} nodes)`, args: [bin, 'status'] },
  ];
  // One untimed pass: the page cache, and the first run of a freshly built dist/.
  for (const c of cases) timeOnce(c, env);
  const samples = new Map<string, number[]>(cases.map((c) => [c.name, []]));
  for (let round = 0; round < passes; round++) {
    for (let k = 0; k < cases.length; k++) {
      const c = cases[(round + k) % cases.length]!;
      samples.get(c.name)!.push(timeOnce(c, env));
    }
  }
  const report = createBenchReport(
    'CLI start-up',
    `How long a person waits for \`converge --help\`, \`converge status <node>\` and \`converge status\` on a ${fmt(nodes)}-node SQLite store, each beside bare \`node -e 0\` in the same run (${passes} alternating passes).`,
  );
  const baseline = samples.get('node -e 0')!;
  const [help, one, all] = cases.slice(1).map((c) => samples.get(c.name)!) as [number[], number[], number[]];
  report.row({ name: 'converge --help', unit: 'ms', converge: help, baseline, better: 'lower', goal: { ratioAtMost: 2 } });
  report.row({
    name: 'converge status <node>',
    unit: 'ms',
    converge: one,
    baseline,
    better: 'lower',
    goal: { atMost: 300 },
    notes: "reads that node's stream alone",
  });
  report.row({
    name: `converge status (${fmt(nodes)} nodes)`,
    unit: 'ms',
    converge: all,
    baseline,
    better: 'lower',
    notes: 'folds the whole store',
  });
  report.note(`bin: ${bin}; store of ${fmt(nodes * 3)} events built through src/store in ${Math.round(buildMs)} ms.`);
  report.note('Wall-clock on a shared 2-core machine: read the ratios, not the milliseconds.');
  report.end();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
