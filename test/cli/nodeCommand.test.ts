import assert from 'node:assert/strict';
import { test } from 'node:test';
import { run } from '../../src/cli/main.ts';
import type { CliIo } from '../../src/cli/io.ts';

// `converge node …` is dispatched to the broker-account command (docs/operations.md, "Node accounts");
// what enroll/revoke do against RabbitMQ is tested in test/brokerAdmin/.

async function cli(args: readonly string[], env: Record<string, string> = {}) {
  let stdout = '';
  let stderr = '';
  const io: CliIo = {
    stdout: (t) => void (stdout += t),
    stderr: (t) => void (stderr += t),
    env,
    stderrIsTTY: false,
    readStdin: async () => Buffer.alloc(0),
    cwd: process.cwd(),
    interrupted: new Promise(() => {}),
  };
  return { code: await run(args, io), stdout, stderr };
}

test('converge node --help prints the enroll and revoke usage and exits 0', async () => {
  const r = await cli(['node', '--help']);
  assert.equal(r.code, 0);
  assert.match(r.stdout, /converge node enroll <id>/);
  assert.match(r.stdout, /converge node revoke <id>/);
});

test('converge node with an id that cannot be a queue name exits 2 with one line, before touching the broker', async () => {
  const r = await cli(['node', 'enroll', 'Bad Id', '--management-url', 'http://127.0.0.1:1']);
  assert.equal(r.code, 2);
  assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
  assert.match(r.stderr, /node id "Bad Id" does not match/);
});

test('the main help lists the node command', async () => {
  const r = await cli(['--help']);
  assert.match(r.stdout, /^\s+node\s+a node's broker account: enroll <id> \| revoke <id>/m);
});

test('converge node rejects bad usage and bad ids with status 2 before touching the broker', async () => {
  const env = { CONVERGE_MANAGEMENT_URL: 'http://127.0.0.1:1' };
  for (const args of [
    ['node'],
    ['node', 'frobnicate', 'n1'],
    ['node', 'enroll'],
    ['node', 'enroll', 'n1', '--bogus'],
    ['node', 'enroll', 'Bad/Id'],
  ]) {
    const r = await cli(args, env);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    assert.equal(r.stdout, '');
  }
});

test('converge node with an unreachable management API exits 1 with one line', async () => {
  const r = await cli(['node', 'revoke', 'n1'], { CONVERGE_MANAGEMENT_URL: 'http://127.0.0.1:1' });
  assert.equal(r.code, 1, r.stderr);
  assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
  assert.match(r.stderr, /^converge: /);
});
