import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { cliIn } from '../support/cliInProcess.ts';
import { historyInStore } from '../support/history.ts';
import { readYaml } from '../support/yamlReader.ts';

// -o json|yaml|wide|name on the read commands, kubectl's way; --json stays as -o json.

let dir: string;
let env: Record<string, string>;
const cli = (args: readonly string[]) => cliIn(dir, args, env);
const jsonLines = (text: string): unknown[] =>
  text
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as unknown);

describe('-o on the read commands', () => {
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'converge-output-'));
    env = { CONVERGE_STORE: `sqlite:${join(dir, 'store.db')}` };
    const store = createSqliteEventStore(join(dir, 'store.db'));
    const script = historyInStore(store);
    const a = await script.send('n1');
    script.tick();
    await script.report('n1', { declared: a.digest, applied: ['web'] });
    await script.send('n2');
    await store.close();
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('-o json is --json', async () => {
    const a = await cli(['status', '-o', 'json']);
    const b = await cli(['status', '--json']);
    assert.equal(a.code, 0, a.stderr);
    assert.deepEqual(
      jsonLines(a.stdout).map((n) => (n as { node: string }).node),
      ['n1', 'n2'],
    );
    // The views carry the liveness of now, so compare what does not move.
    assert.deepEqual(
      jsonLines(a.stdout).map((n) => (n as { status: string }).status),
      jsonLines(b.stdout).map((n) => (n as { status: string }).status),
    );
    assert.equal((await cli(['status', '--output=json'])).code, 0);
  });

  test('-o yaml reads back as the list -o json prints', async () => {
    const y = await cli(['status', '-o', 'yaml']);
    assert.equal(y.code, 0, y.stderr);
    const read = readYaml(y.stdout) as { node: string; status: string; sent: { digest: string } }[];
    const json = jsonLines((await cli(['status', '-o', 'json'])).stdout) as typeof read;
    assert.deepEqual(
      read.map((n) => [n.node, n.status, n.sent.digest]),
      json.map((n) => [n.node, n.status, n.sent.digest]),
    );
    const one = readYaml((await cli(['status', 'n1', '-o', 'yaml'])).stdout) as { node: string; caughtUp: boolean };
    assert.equal(one.node, 'n1');
    assert.equal(one.caughtUp, true);
    const h = readYaml((await cli(['history', 'n1', '-o', 'yaml'])).stdout) as { node: string; type: string }[];
    assert.deepEqual(
      h.map((e) => e.node),
      ['n1', 'n1'],
    );
  });

  test('-o name prints one id a line', async () => {
    assert.equal((await cli(['status', '-o', 'name'])).stdout, 'n1\nn2\n');
    assert.equal((await cli(['status', 'n2', '-o', 'name'])).stdout, 'n2\n');
    assert.equal((await cli(['status', '--status', 'converged', '-o', 'name'])).stdout, 'n1\n');
    const positions = (await cli(['history', 'n1', '-o', 'name'])).stdout.trim().split('\n');
    assert.equal(positions.length, 2);
    for (const p of positions) assert.match(p, /^\d+$/);
    assert.equal((await cli(['rollouts', '-o', 'name'])).stdout, '');
  });

  test('-o wide adds columns: the digests whole, sent and reported times', async () => {
    const digest = (jsonLines((await cli(['status', '--json'])).stdout)[0] as { sent: { digest: string } }).sent.digest;
    const narrow = (await cli(['status'])).stdout;
    const wide = (await cli(['status', '-o', 'wide'])).stdout;
    assert.doesNotMatch(narrow, new RegExp(digest));
    assert.match(wide, new RegExp(digest));
    assert.match(wide.split('\n')[0]!, /LAST SEEN .*SENT AT .*REPORTED AT .*LATENCY/);
    assert.match((await cli(['history', 'n1', '-o', 'wide'])).stdout, new RegExp(digest));
  });

  test('a bad -o, or --json with another -o, is a usage mistake (exit 2) naming the choices', async () => {
    const bad = await cli(['status', '-o', 'xml']);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /-o must be one of json, yaml, wide, name, got "xml"/);
    const both = await cli(['status', '--json', '-o', 'yaml']);
    assert.equal(both.code, 2);
    assert.match(both.stderr, /--json is -o json/);
    // A write command takes --json but not -o.
    const send = await cli(['send', 'n1', 'spec.json', '-o', 'yaml']);
    assert.equal(send.code, 2);
    assert.match(send.stderr, /send has no flag -o/);
    assert.match((await cli(['status', '--help'])).stdout, /-o, --output json\|yaml\|wide\|name/);
  });
});
