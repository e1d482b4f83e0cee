import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import Database from 'better-sqlite3';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { run } from '../../src/cli/main.ts';
import type { CliIo } from '../../src/cli/io.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { historyInStore } from '../support/history.ts';

// What a new user tripped on with the CLI, one test each.

type Result = { code: number; stdout: string; stderr: string };

let dir: string;

async function cli(args: readonly string[], env: Record<string, string> = {}, cwd = dir): Promise<Result> {
  let stdout = '';
  let stderr = '';
  const io: CliIo = {
    stdout: (t) => void (stdout += t),
    stderr: (t) => void (stderr += t),
    env,
    stderrIsTTY: false,
    readStdin: async () => Buffer.alloc(0),
    cwd,
    interrupted: new Promise(() => {}),
  };
  return { code: await run(args, io), stdout, stderr };
}

const oneLine = (r: Result): string => {
  const lines = r.stderr.trim().split('\n');
  assert.equal(lines.length, 1, `one line on stderr, got: ${r.stderr}`);
  return lines[0]!;
};

describe('what a new user tripped on', () => {
  let env: Record<string, string>;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'converge-newuser-'));
    env = { CONVERGE_STORE: `sqlite:${join(dir, 'store.db')}` };
    const store = createSqliteEventStore(join(dir, 'store.db'));
    const script = historyInStore(store);
    for (let i = 0; i < 3; i++) {
      const s = await script.send('n1');
      script.tick();
      await script.report('n1', { declared: s.digest, applied: ['web'] });
      script.tick();
    }
    await store.close();
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('send on a fresh checkout names the default store it did not find instead of creating it', async () => {
    const fresh = mkdtempSync(join(tmpdir(), 'converge-fresh-'));
    try {
      assert.equal((await cli(['keygen', '--out', 'key.pem'], {}, fresh)).code, 0);
      writeFileSync(join(fresh, 'spec.json'), JSON.stringify({ resources: [{ id: 'web' }] }));
      const r = await cli(['send', 'n1', 'spec.json', '--signing-key', join(fresh, 'key.pem')], {}, fresh);
      assert.equal(r.code, 1, r.stdout);
      assert.equal(r.stdout, '');
      assert.match(oneLine(r), new RegExp(`${join(fresh, 'data', 'converge.db')} does not exist`));
      assert.ok(!existsSync(join(fresh, 'data')), 'nothing is created');
    } finally {
      rmSync(fresh, { recursive: true, force: true });
    }
  });

  test('a flag missing its value says which flag and what value it wants', async () => {
    for (const args of [
      ['status', '--store'],
      ['status', '--store', '--json'],
    ]) {
      const r = await cli(args, env);
      assert.equal(r.code, 2);
      const line = oneLine(r);
      assert.match(line, /--store needs a value/);
      assert.match(line, /<url>/);
      assert.doesNotMatch(line, /ambiguous/);
    }
  });

  test('an unknown flag is named in a whole sentence with a "did you mean"', async () => {
    const r = await cli(['status', '--stor', 'sqlite:x.db'], env);
    assert.equal(r.code, 2);
    const line = oneLine(r);
    assert.match(line, /--stor\b/);
    assert.match(line, /did you mean --store\?/);
    assert.match(line, /\)$/, 'the sentence ends; it is not cut off');
  });

  test('an unknown command offers the one meant', async () => {
    const r = await cli(['stauts'], env);
    assert.equal(r.code, 2);
    assert.match(oneLine(r), /did you mean status\?/);
  });

  test('--trust-missing-user-id takes on or off, as its variable does, and help says so', async () => {
    const help = await cli(['serve', '--help']);
    assert.match(help.stdout, /--trust-missing-user-id on\|off .*CONVERGE_TRUST_MISSING_USER_ID, default off/);
    // "on" is the flag's value, not a positional argument: status takes at most one, so two would be a usage mistake.
    const r = await cli(['status', 'n1', '--trust-missing-user-id', 'on'], env);
    assert.equal(r.code, 0, r.stderr);
    const bad = await cli(['serve', '--trust-missing-user-id', 'maybe', '--store', 'memory:'], {});
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--trust-missing-user-id \/ CONVERGE_TRUST_MISSING_USER_ID: must be on or off/);
  });

  test('a read command runs over a bad CONVERGE_API_TOKENS it does not use; serve, which uses it, refuses', async () => {
    const r = await cli(['status', 'n1'], { ...env, CONVERGE_API_TOKENS: 'short:read' });
    assert.equal(r.code, 0, r.stderr);
    const s = await cli(['serve', '--store', 'memory:'], { CONVERGE_API_TOKENS: 'short:read' });
    assert.equal(s.code, 2);
    assert.match(s.stderr, /CONVERGE_API_TOKENS/);
  });

  test('a bad node id is a usage mistake (exit 2) for every command that takes one', async () => {
    for (const args of [
      ['send', 'Bad Id', 'spec.json'],
      ['status', 'Bad Id'],
      ['history', 'Bad Id'],
      ['state', 'Bad Id', '--at', '1'],
      ['forensics', 'races', '--node', 'Bad Id'],
      ['node', 'enroll', 'Bad Id'],
    ]) {
      const r = await cli(args, { ...env, CONVERGE_MANAGEMENT_URL: 'http://127.0.0.1:1' });
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(oneLine(r), /node id "Bad Id"/);
    }
  });

  test('forensics races --node of a node never heard of says so and exits 1, as status does', async () => {
    for (const args of [
      ['forensics', 'races', '--node', 'n9'],
      ['status', 'n9'],
    ]) {
      const r = await cli(args, env);
      assert.equal(r.code, 1, `${args.join(' ')}: ${r.stderr}`);
      assert.match(oneLine(r), /no event has ever named node "n9"/);
    }
  });

  test('keygen without --out prints the key id and public key, as its help says, and keeps stdout the private key', async () => {
    const help = await cli(['keygen', '--help']);
    assert.match(help.stdout, /prints its key id and public key/);
    const r = await cli(['keygen']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^-----BEGIN PRIVATE KEY-----\n[\s\S]*-----END PRIVATE KEY-----\n$/);
    assert.match(r.stderr, /key id [0-9a-f]{16}\n/);
    assert.match(r.stderr, /-----BEGIN PUBLIC KEY-----/);
  });

  test('keygen --out over an existing file refuses in one sentence and leaves the file alone', async () => {
    writeFileSync(join(dir, 'taken.pem'), 'keep me');
    const r = await cli(['keygen', '--out', 'taken.pem']);
    assert.equal(r.code, 1);
    const line = oneLine(r);
    assert.match(line, /taken\.pem already exists/);
    assert.doesNotMatch(line, /EEXIST/);
    assert.equal(readFileSync(join(dir, 'taken.pem'), 'utf8'), 'keep me');
  });

  test('history --limit lists only the declarations its events name, not every one', async () => {
    // n1: send 1, report 1, send 2, report 2, send 3, report 3; the latest two events concern serial 3 alone.
    const r = await cli(['history', 'n1', '--limit', '2'], env);
    assert.equal(r.code, 0, r.stderr);
    const [events, declarations] = r.stdout.split('\n\n') as [string, string];
    assert.equal(events.trim().split('\n').length, 1 + 2);
    const serials = declarations
      .trim()
      .split('\n')
      .slice(1)
      .map((l) => l.split(/\s+/)[0]);
    assert.deepEqual(serials, ['3']);
    const all = await cli(['history', 'n1'], env);
    assert.equal(all.stdout.split('\n\n')[1]!.trim().split('\n').length, 1 + 3);
  });

  test('an EventStoreDB that cannot be reached is one plain sentence, not gRPC text with a dangling note', async () => {
    const r = await cli(['status', 'n1'], { CONVERGE_STORE: 'esdb://127.0.0.1:1?tls=false' });
    assert.equal(r.code, 1);
    const line = oneLine(r);
    assert.match(line, /ECONNREFUSED 127\.0\.0\.1:1/);
    assert.doesNotMatch(line, /Resolution note/);
    assert.doesNotMatch(line, /14 UNAVAILABLE/);
    assert.doesNotMatch(line, /Error: /);
  });

  test('node enroll of an existing account names the flag that rotates it: --replace', async () => {
    // A management API that knows n1 as a node account (no tags) and nothing else.
    const api = createServer((req, res) => {
      const known = req.method === 'GET' && req.url === '/api/users/n1';
      res.writeHead(known ? 200 : 404, { 'content-type': 'application/json' });
      res.end(known ? JSON.stringify({ name: 'n1', tags: [] }) : '{}');
    });
    await new Promise<void>((r) => api.listen(0, '127.0.0.1', r));
    try {
      const url = `http://guest:guest@127.0.0.1:${(api.address() as AddressInfo).port}`;
      const r = await cli(['node', 'enroll', 'n1', '--management-url', url]);
      assert.equal(r.code, 1);
      const line = oneLine(r);
      assert.match(line, /node n1 already has a broker account/);
      assert.match(line, /converge node enroll n1 --replace/);
      assert.doesNotMatch(line, /with replace/);
    } finally {
      api.close();
    }
  });

  test('help documents the exit statuses', async () => {
    for (const args of [['--help'], ['status', '--help']]) {
      const r = await cli(args);
      assert.match(r.stdout, /exit status: 0 done · 1 the command failed .*\n.*2 a usage mistake/);
    }
  });

  test('node takes the configuration flags every other command takes', async () => {
    const r = await cli(['node', 'revoke', 'Bad Id', '--store', 'sqlite:x.db', '--log-level', 'warn', '--json']);
    // Reaches the node id check, so the flags were accepted.
    assert.equal(r.code, 2);
    assert.match(oneLine(r), /node id "Bad Id"/);
  });
});

describe('read commands about one node read only its stream (§5)', () => {
  let env: Record<string, string>;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'converge-onestream-'));
    const path = join(dir, 'store.db');
    env = { CONVERGE_STORE: `sqlite:${path}` };
    const store = createSqliteEventStore(path);
    const script = historyInStore(store);
    const a = await script.send('n1');
    script.tick();
    const b = await script.send('n1');
    script.tick();
    await script.report('n1', { declared: a.digest, applied: ['web'] });
    script.tick();
    await script.report('n1', { declared: b.digest, applied: ['web'] });
    await script.send('n2');
    await store.close();
    // Another node's event made unreadable: any command that reads the whole store trips on it.
    const db = new Database(path);
    db.prepare('UPDATE events SET data = \'{"not": "a declaration"}\' WHERE stream = \'node-n2\'').run();
    db.close();
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('the unreadable event is there: a whole-store command fails on it', async () => {
    const r = await cli(['forensics', 'races'], env);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /does not match its schema/);
  });

  for (const args of [
    ['status', 'n1'],
    ['history', 'n1'],
    ['state', 'n1', '--at', '2'],
    ['forensics', 'races', '--node', 'n1'],
  ]) {
    test(`converge ${args.join(' ')} is not stopped by another node's unreadable event`, async () => {
      const r = await cli([...args, '--json'], env);
      assert.equal(r.code, 0, r.stderr);
      assert.notEqual(r.stdout, '');
    });
  }

  test("forensics races --node finds the stale report in that node's stream", async () => {
    const r = await cli(['forensics', 'races', '--node', 'n1', '--json'], env);
    const races = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { node: string; class: string });
    assert.deepEqual(
      races.map((x) => x.node),
      ['n1'],
    );
  });
});
