import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
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
});
