import assert from 'node:assert/strict';
import { test } from 'node:test';
import { run } from '../../src/cli/main.ts';
import type { CliIo } from '../../src/cli/io.ts';

// `serve` reads its flood settings — the per-node budget and the bound on mesh.dead — and
// checks them before it starts anything (a setting a command does not declare keeps its default
// silently, so a flag given to it would be ignored).

async function cli(args: readonly string[]) {
  let stdout = '';
  let stderr = '';
  const io: CliIo = {
    stdout: (t) => void (stdout += t),
    stderr: (t) => void (stderr += t),
    env: {},
    stderrIsTTY: false,
    readStdin: async () => Buffer.alloc(0),
    cwd: process.cwd(),
    // Were the flags ignored, serve would start: stop it at once, so the test fails rather than hangs.
    interrupted: Promise.resolve(),
  };
  return { code: await run(args, io), stdout, stderr };
}

/** `serve` on a memory store and any free port, with these flags (name without its dashes → value). */
const serve = (flags: Readonly<Record<string, string>>) =>
  cli(['serve', '--store', 'memory:', '--port', '0', ...Object.entries(flags).flatMap(([flag, value]) => [`--${flag}`, value])]);

test('serve checks --node-report-rate, --node-report-burst, --dead-letter-max-length and --dead-letter-max-bytes before it starts', async () => {
  const flags = {
    'node-report-rate': '-1',
    'node-report-burst': 'lots',
    'dead-letter-max-length': '1.5',
    'dead-letter-max-bytes': '0',
    'management-url': 'ftp://x',
  };
  const r = await serve(flags);
  assert.equal(r.code, 2, r.stderr);
  for (const flag of Object.keys(flags)) assert.match(r.stderr, new RegExp(`--${flag} / `), `${flag} is checked: ${r.stderr}`);
});

test('serve --help lists them', async () => {
  const r = await cli(['serve', '--help']);
  for (const flag of ['node-report-rate', 'node-report-burst', 'dead-letter-max-length', 'dead-letter-max-bytes', 'management-url']) {
    assert.match(r.stdout, new RegExp(`--${flag} `), flag);
  }
});

test('serve checks the connection caps, the listener limits and --admin-listen before it starts', async () => {
  const flags = {
    'max-streams': '0',
    'max-streams-per-client': 'x',
    'max-awaits': '-3',
    'max-awaits-per-client': '1.5',
    'max-connections': 'none',
    'stream-max-ms': '10',
    'idle-timeout-ms': '-1',
    'request-timeout-ms': 'soon',
    'admin-listen': 'nowhere',
  };
  const r = await serve(flags);
  assert.equal(r.code, 2, r.stderr);
  for (const flag of Object.keys(flags)) assert.match(r.stderr, new RegExp(`--${flag} / `), `${flag} is checked: ${r.stderr}`);
  const help = await cli(['serve', '--help']);
  for (const flag of Object.keys(flags)) assert.match(help.stdout, new RegExp(`--${flag} `), flag);
});
