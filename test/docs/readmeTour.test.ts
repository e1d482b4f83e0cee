import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { until } from '../support/until.ts';
import { startReceiver } from '../notify/receiver.ts';

// The README's tour is what a newcomer runs first: every command in it runs here, as written,
// against the demo the README tells them to start. Only what the reader fills in is filled in
// (<path>, <token>, the API's address, since port 8080 may be taken), and `npx converge` runs the
// same bin/converge.js that npx finds, without npx's own start-up. The webhook the tour names
// (port 9000) is a receiver of the test's own: the `> notify.json` line runs before the demo starts,
// as the README says, and the halt must arrive there.

const root = new URL('../..', import.meta.url).pathname;
const bin = join(root, 'bin/converge.js');

/** The shell commands of the README's tour section, one per entry, continuation lines joined. */
function tourCommands(): string[] {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## A short tour'), readme.indexOf('\n## ', readme.indexOf('## A short tour') + 1));
  const blocks = [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
  return blocks
    .flatMap((b) => b.replace(/\\\n\s*/g, '').split('\n'))
    .map((l) => l.trim())
    .filter((l) => l !== '');
}

/** Drops a trailing `# comment` (outside quotes), keeping what it says for the test's checks. */
function splitComment(line: string): { command: string; comment: string } {
  let quote: string | null = null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (quote !== null) {
      if (c === quote) quote = null;
    } else if (c === "'" || c === '"') quote = c;
    else if (c === '#' && (i === 0 || line[i - 1] === ' ')) return { command: line.slice(0, i).trim(), comment: line.slice(i + 1).trim() };
  }
  return { command: line, comment: '' };
}

test("every command of the README's tour runs as written against the demo", { timeout: 240_000 }, async (t) => {
  const commands = tourCommands();
  assert.ok(commands.length >= 8, `the tour has its commands (found ${commands.length})`);
  const work = mkdtempSync(join(tmpdir(), 'converge-tour-'));
  const hook = await startReceiver();
  t.after(() => hook.close());
  const webhook = 'http://127.0.0.1:9000/hook';
  const notifyLine = commands.find((c) => c.endsWith('> notify.json')) ?? '';
  assert.ok(notifyLine?.includes(webhook), 'the tour writes notify.json naming its webhook');
  assert.equal(spawnSync('bash', ['-c', notifyLine.replaceAll(webhook, hook.url)], { cwd: work }).status, 0);
  // As the README starts it: `npm start -- --interval-ms 60000 --notify-config notify.json` runs `converge demo …`.
  const demo = spawn(process.execPath, [bin, 'demo', '--interval-ms', '60000', '--notify-config', 'notify.json', '--port', '0'], {
    cwd: work,
    stdio: ['ignore', 'pipe', 'pipe'],
    // TMPDIR: the demo keeps its store in a fresh dir under the OS temp dir, for the reader to use afterwards.
    env: { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CONVERGE_'))), TMPDIR: work },
  });
  let err = '';
  demo.stderr.setEncoding('utf8').on('data', (c: string) => (err += c));
  demo.stdout.resume();
  // A demo that exits (dist/ missing, a port taken) fails the wait at once with what it printed.
  let exited: string | null = null;
  demo.on('exit', (code, signal) => (exited = `the demo exited (${code ?? signal}) before the tour ran: ${err.trim()}`));
  const demoUp = (): void => {
    if (exited !== null) throw new Error(exited);
  };
  t.after(() => {
    demo.kill('SIGKILL');
    rmSync(work, { recursive: true, force: true });
  });
  await until('the demo to print its API, token and store', () => (demoUp(), /store sqlite:\S+/.test(err) && /Bearer \S+\)/.test(err)), {
    timeoutMs: 60_000,
  });
  const url = /API (http:\/\/\S+)/.exec(err)![1]!;
  const token = /Bearer (\S+)\)/.exec(err)![1]!;
  const path = /store sqlite:(\S+)/.exec(err)![1]!;
  // The tour reads a fleet that has heard from its nodes: wait for the first round to land on most of them.
  await until(
    'the first round to converge on most nodes',
    async () => {
      const r = await fetch(`${url}/v1/fleet`, { headers: { authorization: `Bearer ${token}` } });
      const body = (await r.json()) as { byStatus?: { converged?: number } };
      return (body.byStatus?.converged ?? 0) >= 40;
    },
    { timeoutMs: 60_000 },
  );

  for (const line of commands) {
    const { command, comment } = splitComment(line);
    const filled = command
      .replaceAll('<path>', path)
      .replaceAll('<token>', token)
      .replaceAll('http://127.0.0.1:8080', url)
      .replaceAll(webhook, hook.url)
      .replace(/^npx converge /, `${JSON.stringify(process.execPath)} ${JSON.stringify(bin)} `);
    const r = spawnSync('bash', ['-c', filled], { cwd: work, encoding: 'utf8', timeout: 120_000 });
    const out = `${r.stdout}${r.stderr}`;
    const halts = /halts in wave (\d+): (\S+) refuses/.exec(comment);
    if (halts !== null) {
      // `rollout status --watch` follows the rollout to its end and exits non-zero when it halted.
      assert.match(out, /halted/, `${command}\n${out}`);
      assert.match(out, new RegExp(`wave ${halts[1]}`), `${command}: halts in wave ${halts[1]}\n${out}`);
      assert.match(out, new RegExp(halts[2]!), `${command}: names ${halts[2]}\n${out}`);
      continue;
    }
    assert.equal(r.status, 0, `${command} exited ${String(r.status)}\n${out.slice(0, 2000)}`);
    const told = /CloudEvent (io\.converge\.\S+)/.exec(comment);
    if (told !== null)
      await until(`${told[1]} at the webhook`, () => hook.received.some((m) => (JSON.parse(m.body) as { type: string }).type === told[1]));
    if (command.startsWith('curl')) assert.doesNotMatch(r.stdout, /"status":\s*40\d/, `${command}\n${r.stdout}`);
  }
});
