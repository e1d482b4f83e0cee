import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { cliIn } from '../support/cliInProcess.ts';
import { historyInStore } from '../support/history.ts';

// `converge node hold|release|pin|unpin` and `send --force` as an operator runs them, on a SQLite
// file (docs/design.md §8 "Holds and pins").

const dir = mkdtempSync(join(tmpdir(), 'converge-holds-cli-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let env: Record<string, string>;

before(async () => {
  const key = await cliIn(dir, ['keygen', '--out', 'key.pem', '--json']);
  assert.equal(key.code, 0, key.stderr);
  env = { CONVERGE_STORE: `sqlite:${join(dir, 'store.db')}`, CONVERGE_SIGNING_KEY: join(dir, 'key.pem'), USER: 'ops' };
  const store = createSqliteEventStore(join(dir, 'store.db'));
  const h = historyInStore(store);
  await h.send('n1');
  await h.send('n2');
  await store.close();
  writeFileSync(join(dir, 'spec.json'), JSON.stringify({ resources: [{ id: 'web', image: 'nginx:2' }] }));
});

test('node hold shows in status <node>, a second hold is refused, release clears it', async () => {
  const r = await cliIn(dir, ['node', 'hold', 'n1', '--reason', 'disk swap', '--json'], env);
  assert.equal(r.code, 0, r.stderr);
  const held = JSON.parse(r.stdout);
  assert.deepEqual([held.node, held.held.by, held.held.reason, held.pinned], ['n1', 'cli ops', 'disk swap', null]);

  const status = await cliIn(dir, ['status', 'n1'], env);
  assert.equal(status.code, 0, status.stderr);
  assert.match(status.stdout, /^held +since \S+ by cli ops \(disk swap\): rollouts skip it$/m);
  assert.equal(JSON.parse((await cliIn(dir, ['status', 'n1', '-o', 'json'], env)).stdout).held.reason, 'disk swap');

  const again = await cliIn(dir, ['node', 'hold', 'n1'], env);
  assert.equal(again.code, 1);
  assert.match(again.stderr, /CONVERGE_ERR_HOLD_STATE|held already/);

  const released = await cliIn(dir, ['node', 'release', 'n1'], env);
  assert.equal(released.code, 0, released.stderr);
  assert.match(released.stdout, /^released node n1 at /);
  assert.doesNotMatch((await cliIn(dir, ['status', 'n1'], env)).stdout, /^held/m);
  // --reason is for the commands that record one.
  assert.equal((await cliIn(dir, ['node', 'release', 'n1', '--reason', 'x'], env)).code, 2);
});

test('send to a pinned node is refused without --force, and goes through with it', async () => {
  assert.equal((await cliIn(dir, ['node', 'pin', 'n2', '--reason', 'freeze'], env)).code, 0);
  assert.match((await cliIn(dir, ['status', 'n2'], env)).stdout, /^pinned +since .*\(freeze\): it keeps its spec/m);

  const refused = await cliIn(dir, ['send', 'n2', 'spec.json', '--json'], env);
  assert.equal(refused.code, 1, refused.stdout);
  assert.match(refused.stderr, /pinned/);
  const before = JSON.parse((await cliIn(dir, ['status', 'n2', '-o', 'json'], env)).stdout).sent.serial;

  const forced = await cliIn(dir, ['send', 'n2', 'spec.json', '--force', '--json'], env);
  assert.equal(forced.code, 0, forced.stderr);
  assert.equal(JSON.parse(forced.stdout).serial, before + 1);

  assert.equal((await cliIn(dir, ['node', 'unpin', 'n2'], env)).code, 0);
  const sent = await cliIn(dir, ['send', 'n2', 'spec.json'], env);
  assert.equal(sent.code, 0, sent.stderr);
});
