#!/usr/bin/env node
// Runs every test file through node's own runner with tsx. Node 20's `--test` does not
// expand globs, so the file list is built here. Unit and contract tests run in parallel;
// tests that touch the shared RabbitMQ broker or spawn engines (int, e2e, faults) run one
// file at a time so they never fight over queues, ports or the machine's two cores.
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const only = process.argv.slice(2);

function walk(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...walk(p));
    else if (name.endsWith('.test.ts')) out.push(relative(root, p));
  }
  return out.sort();
}

const all = walk(join(root, 'test')).filter((f) => only.length === 0 || only.some((o) => f.includes(o)));
const serial = (f) => /\.(int|e2e|fault)\.test\.ts$/.test(f) || f.startsWith('test/e2e/') || f.startsWith('test/faults/');
const groups = [
  { files: all.filter((f) => !serial(f)), concurrency: 2 },
  { files: all.filter(serial), concurrency: 1 },
];

// A test that hangs fails by name after ten minutes (the longest takes under a minute) instead of
// holding the whole run until CI's own limit; a test may set a longer timeout of its own.
const testTimeoutMs = 600_000;

let failed = false;
for (const { files, concurrency } of groups) {
  if (files.length === 0) continue;
  const r = spawnSync(
    process.execPath,
    ['--import', 'tsx', '--test', `--test-concurrency=${concurrency}`, `--test-timeout=${testTimeoutMs}`, '--test-reporter=spec', ...files],
    { stdio: 'inherit', cwd: root, env: process.env },
  );
  if (r.status !== 0) failed = true;
}
process.exit(failed ? 1 : 0);
