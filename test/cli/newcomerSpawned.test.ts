import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { historyInStore } from '../support/history.ts';

// What a newcomer tripped on with the built command (`npm run build` first): the process as a
// shell runs it, its pipes and its signals.

const bin = new URL('../../bin/converge.js', import.meta.url).pathname;

type Exit = { code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string };

/** Run the built command; `closeStdout` closes the reading end of its stdout at once, as `| head` does once it has enough. */
function converge(args: readonly string[], options: { closeStdout?: boolean; cwd?: string } = {}): Promise<Exit> {
  const child = spawn(process.execPath, [bin, ...args], { cwd: options.cwd ?? tmpdir(), stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  if (options.closeStdout === true) child.stdout.destroy();
  else child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr })));
}

let dir: string;
let store: string;

describe('the built converge command, as a newcomer ran it', () => {
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'converge-newcomer-bin-'));
    const s = createSqliteEventStore(join(dir, 'store.db'));
    const h = historyInStore(s);
    for (let i = 0; i < 50; i++) {
      const node = `n${i}`;
      const a = await h.send(node);
      h.tick();
      await h.send(node);
      h.tick();
      await h.report(node, { declared: a.digest, applied: ['web'] });
    }
    await s.close();
    store = `sqlite:${join(dir, 'store.db')}`;
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('a reader that closes stdout early (| head) ends the command quietly, without an EPIPE stack', async () => {
    for (const args of [['--help'], ['status', '--json', '--store', store], ['forensics', 'races', '--store', store]]) {
      const r = await converge(args, { closeStdout: true });
      assert.doesNotMatch(r.stderr, /EPIPE|Error|\n\s+at /, `${args.join(' ')}: no stack on stderr`);
      assert.equal(r.code, 0, args.join(' '));
    }
  });

  test(
    'Ctrl-C stops a demo between two long rounds promptly, saying so; its hint is a command that runs here',
    { timeout: 60_000 },
    async () => {
      const child = spawn(process.execPath, [bin, 'demo', '--nodes', '5', '--interval-ms', '60000', '--port', '0'], {
        cwd: dir,
        // The demo keeps its store in a fresh dir under the OS temp dir, for the user to read afterwards: here, the test's.
        env: { ...process.env, TMPDIR: dir },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      const started = new Promise<void>((resolve) =>
        child.stderr.on('data', (d: Buffer) => {
          stderr += d.toString();
          if (/afterwards:/.test(stderr)) resolve();
        }),
      );
      child.stdout.resume();
      const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
      await started;
      assert.match(stderr, /afterwards: npx converge forensics races --store sqlite:\S+/);
      // Into the wait for round 2, then Ctrl-C.
      await new Promise((r) => setTimeout(r, 1_000));
      const interrupted = Date.now();
      child.kill('SIGINT');
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      const code = await exited;
      clearTimeout(timer);
      assert.ok(Date.now() - interrupted < 20_000, `exited ${Date.now() - interrupted} ms after SIGINT; the interval is 60 s`);
      assert.equal(code, 0, stderr);
      assert.match(stderr, /stopping/);
    },
  );

  test('prepare builds after npm install, and not when npx installs the project to run its own bin', () => {
    const root = new URL('../..', import.meta.url).pathname;
    const r = spawnSync(process.execPath, ['scripts/prepare.mjs'], {
      cwd: root,
      env: { ...process.env, npm_command: 'exec', PATH: '/nonexistent' },
      encoding: 'utf8',
    });
    // With no npm on the PATH, a build would fail: exiting 0 says it was not attempted.
    assert.equal(r.status, 0, r.stderr);
  });
});
