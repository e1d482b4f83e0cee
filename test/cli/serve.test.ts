import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { test } from 'node:test';
import { tempDir } from '../support/tempDir.ts';

// `converge serve` as an operator runs it: a real process on a fresh SQLite store and an
// ephemeral port, answering health, readiness and a problem+json 404, and stopping cleanly.

const bin = new URL('../../bin/converge.js', import.meta.url).pathname;

test('converge serve answers /healthz, /readyz and a problem+json 404, and exits 0 on SIGTERM', { timeout: 60_000 }, async (t) => {
  const dir = tempDir(t, 'converge-serve-');
  const env: NodeJS.ProcessEnv = { ...process.env, CONVERGE_STORE: `sqlite:${join(dir, 'data', 'store.db')}`, CONVERGE_LOG_LEVEL: 'warn' };
  for (const k of ['CONVERGE_AMQP_URL', 'CONVERGE_API_TOKENS', 'CONVERGE_SIGNING_KEY', 'CONVERGE_PORT']) delete env[k];
  const child = spawn(process.execPath, [bin, 'serve', '--port', '0'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8');
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  try {
    const url = await new Promise<string>((resolve, reject) => {
      child.stderr.on('data', (chunk: string) => {
        stderr += chunk;
        const m = /converge serving on (http:\/\/\S+)/.exec(stderr);
        if (m !== null) resolve(m[1]!);
      });
      void exited.then(([code]) => reject(new Error(`serve exited ${code} before listening: ${stderr}`)));
    });

    const health = await fetch(`${url}/healthz`);
    assert.equal(health.status, 200);
    assert.deepEqual(await health.json(), { ok: true, ready: true, lag: '0', position: null });
    const ready = await fetch(`${url}/readyz`);
    assert.equal(ready.status, 200);
    assert.equal(((await ready.json()) as { ready: boolean }).ready, true);

    const missing = await fetch(`${url}/v1/nodes/ghost`);
    assert.equal(missing.status, 404);
    assert.match(missing.headers.get('content-type') ?? '', /^application\/problem\+json/);
    const problem = (await missing.json()) as { code: string; status: number };
    assert.equal(problem.code, 'CONVERGE_ERR_NODE_NOT_FOUND');
    assert.equal(problem.status, 404);
  } finally {
    child.kill('SIGTERM');
  }
  const [code, signal] = await exited;
  assert.equal(signal, null, stderr);
  assert.equal(code, 0, stderr);
  // Its log lines (the warnings about no broker and no signing key, at least) carry ISO times
  // an operator reads without converting epoch milliseconds.
  const logs = stderr
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { time: unknown; msg: string });
  assert.ok(
    logs.some((l) => /no --amqp/.test(l.msg)),
    stderr,
  );
  for (const l of logs) assert.match(String(l.time), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, JSON.stringify(l));
});
