#!/usr/bin/env node
// Runs the benchmarks (bench/README.md): every bench/<name>.ts (or bench/<name>/index.ts) in name
// order, or only those whose names contain an argument (`npm run bench -- store api`). Each prints
// its own baseline and ratio through bench/support/report.ts. With `--report` the
// rows they hand back (JSON lines in the file named by CONVERGE_BENCH_OUT) become BENCHMARKS.md,
// as `npm run faults -- --report` writes RELIABILITY.md.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const benchDir = join(root, 'bench');
const args = process.argv.slice(2);
// --keep-earlier: the section a bench measured now had keeps the run it replaces beside the new one (a before and after).
const keepEarlier = args.includes('--keep-earlier');
const report = args.includes('--report') || keepEarlier;
const unknown = args.filter((a) => a.startsWith('-') && a !== '--report' && a !== '--keep-earlier');
if (unknown.length > 0) {
  console.error(`bench: unknown option ${unknown.join(', ')}; usage: npm run bench -- [name …] [--report] [--keep-earlier]`);
  process.exit(2);
}
const only = args.filter((a) => !a.startsWith('-'));

/** `{ name, file }` of every bench: bench/<name>.ts, or bench/<name>/index.ts for a bench with helpers of its own. */
function discover() {
  if (!existsSync(benchDir)) return [];
  const out = [];
  for (const entry of readdirSync(benchDir)) {
    const p = join(benchDir, entry);
    if (entry === 'support') continue;
    if (statSync(p).isDirectory()) {
      if (existsSync(join(p, 'index.ts'))) out.push({ name: entry, file: `bench/${entry}/index.ts` });
    } else if (entry.endsWith('.ts') && !entry.endsWith('.d.ts')) {
      out.push({ name: entry.slice(0, -3), file: `bench/${entry}` });
    }
  }
  return out.sort((a, b) => a.name.localeCompare(b.name));
}

const all = discover();
// A bench's exact name runs that bench alone (`rollout`, not rolloutStatus and rolloutView too);
// any other word runs every bench whose name holds it.
const matches = (b, o) => (all.some((x) => x.name === o) ? b.name === o : b.name.includes(o));
const chosen = all.filter((b) => only.length === 0 || only.some((o) => matches(b, o)));
if (chosen.length === 0) {
  console.error(
    only.length === 0 ? 'no benchmarks in bench/' : `no benchmark matches ${only.join(', ')} (have: ${all.map((b) => b.name).join(', ')})`,
  );
  process.exit(1);
}

// The settings a reader needs to repeat a run: every CONVERGE_BENCH_* and BENCH_* variable set now.
const settings = Object.entries(process.env)
  .filter(([k]) => (k.startsWith('CONVERGE_BENCH_') || k.startsWith('BENCH_')) && k !== 'CONVERGE_BENCH_OUT')
  .map(([k, v]) => `${k}=${v} `)
  .join('');

/** The commit the bench ran at, with `+` when the worktree had changes (null outside git). */
function gitCommit() {
  const head = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' });
  if (head.status !== 0) return null;
  const dirty = spawnSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: root, encoding: 'utf8' });
  return `${head.stdout.trim()}${dirty.stdout.trim() === '' ? '' : '+'}`;
}

const tmp = mkdtempSync(join(tmpdir(), 'converge-bench-'));
const runs = [];
let failed = false;
try {
  for (const b of chosen) {
    console.log(`\n## ${b.file}`);
    const out = join(tmp, `${b.name}.jsonl`);
    writeFileSync(out, '');
    const started = { date: new Date().toISOString(), loadAverage: loadavg()[0], commit: gitCommit() };
    const r = spawnSync(process.execPath, ['--import', 'tsx', b.file], {
      stdio: 'inherit',
      cwd: root,
      env: { ...process.env, CONVERGE_BENCH_OUT: out },
    });
    if (r.status !== 0) {
      console.error(`${b.file} failed (exit ${r.status ?? r.signal})`);
      failed = true;
    }
    const lines = readFileSync(out, 'utf8')
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l));
    runs.push({
      name: b.name,
      file: b.file,
      command: `${settings}npm run bench -- ${b.name} --report${keepEarlier ? ' --keep-earlier' : ''}`,
      ...started,
      node: process.version,
      cores: cpus().length,
      cpu: cpus()[0]?.model.trim() ?? 'unknown CPU',
      memoryGiB: Math.round(totalmem() / 2 ** 30),
      exit: r.status,
      lines,
    });
  }
  if (report) {
    const manifest = join(tmp, 'manifest.json');
    writeFileSync(manifest, JSON.stringify({ runs, benches: all.map((b) => b.name), keepEarlier }));
    const w = spawnSync(process.execPath, ['--import', 'tsx', 'bench/support/writeBenchmarks.ts', manifest], {
      stdio: 'inherit',
      cwd: root,
    });
    if (w.status !== 0) failed = true;
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
