#!/usr/bin/env node
// Runs the benchmarks: every bench/*.ts in sorted order, or only those whose names contain an
// argument (`npm run bench -- store`). Each prints its own baseline and ratio (STYLE.md §9).
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const benchDir = join(root, 'bench');
const only = process.argv.slice(2);
const all = existsSync(benchDir)
  ? readdirSync(benchDir)
      .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
      .sort()
  : [];
const files = all.filter((f) => only.length === 0 || only.some((o) => f.includes(o)));
if (files.length === 0) {
  console.error(only.length === 0 ? 'no benchmarks in bench/' : `no benchmark matches ${only.join(', ')}`);
  process.exit(1);
}

let failed = false;
for (const f of files) {
  console.log(`\n## bench/${f}`);
  const r = spawnSync(process.execPath, ['--import', 'tsx', join('bench', f)], { stdio: 'inherit', cwd: root, env: process.env });
  if (r.status !== 0) {
    console.error(`bench/${f} failed (exit ${r.status ?? r.signal})`);
    failed = true;
  }
}
process.exit(failed ? 1 : 0);
