import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { cliIn } from '../support/cliInProcess.ts';
import { historyInStore } from '../support/history.ts';

// `converge store stats` and `converge node retire` as an operator runs them, on a SQLite file.

const dir = mkdtempSync(join(tmpdir(), 'converge-store-cli-'));
after(() => rmSync(dir, { recursive: true, force: true }));

async function fleetFile(name: string): Promise<string> {
  const path = join(dir, name);
  const store = createSqliteEventStore(path);
  const h = historyInStore(store);
  const a = await h.send('n1');
  h.tick();
  await h.report('n1', { declared: a.digest, applied: ['web'] });
  await h.alive('old');
  await h.alive('n1');
  await store.close();
  return path;
}

test('store stats: events and bytes by type and age, the totals and the file, as text and as JSON', async () => {
  const path = await fleetFile('stats.db');
  const json = await cliIn(dir, ['store', 'stats', '--store', `sqlite:${path}`, '-o', 'json']);
  assert.equal(json.code, 0, json.stderr);
  const r = JSON.parse(json.stdout);
  assert.equal(r.store, 'sqlite');
  assert.equal(r.events, 4);
  assert.deepEqual(Object.fromEntries(r.byType.map((t: { type: string; events: number }) => [t.type, t.events])), {
    DeclarationSent: 1,
    ReportReceived: 1,
    AliveSeen: 2,
  });
  assert.equal(
    r.byType.reduce((n: number, t: { bytes: number }) => n + t.bytes, 0),
    r.bytes,
  );
  assert.deepEqual(
    r.byAge.map((a: { age: string }) => a.age),
    ['day', 'week', 'month', 'older'],
  );
  // Every event is in one bucket or another, whatever its age today.
  assert.equal(
    r.byAge.reduce((n: number, a: { events: number }) => n + a.events, 0),
    4,
  );
  assert.equal(r.storage[0].kind, 'file');
  assert.equal(r.storage[0].name, path);
  assert.ok(r.storage[0].bytes > 0);

  const text = await cliIn(dir, ['store', 'stats', '--store', `sqlite:${path}`]);
  assert.equal(text.code, 0, text.stderr);
  assert.match(text.stdout, /^sqlite store: 4 events, /);
  assert.match(text.stdout, /^TYPE +EVENTS +BYTES +SHARE$/m);
  assert.match(text.stdout, /^AliveSeen +2 /m);
  assert.match(text.stdout, /^AGE +EVENTS +BYTES +SHARE$/m);
  assert.equal(text.stderr, '', 'no progress line when stderr is not a terminal');

  const usage = await cliIn(dir, ['store', 'count', '--store', `sqlite:${path}`]);
  assert.equal(usage.code, 2);
});

test('node retire: the node leaves status, its own state and history stay; retiring it again is refused', async () => {
  const path = await fleetFile('retire.db');
  const store = ['--store', `sqlite:${path}`];
  const listed = async (): Promise<string[]> => (await cliIn(dir, ['status', ...store, '-o', 'name'])).stdout.trim().split('\n');
  assert.deepEqual(await listed(), ['n1', 'old']);

  const r = await cliIn(dir, ['node', 'retire', 'old', ...store, '--reason', 'decommissioned', '--json']);
  assert.equal(r.code, 0, r.stderr);
  const retired = JSON.parse(r.stdout);
  assert.equal(retired.node, 'old');
  assert.deepEqual(await listed(), ['n1']);

  const one = await cliIn(dir, ['status', 'old', ...store]);
  assert.equal(one.code, 0, one.stderr);
  assert.match(one.stdout, new RegExp(`^retired +${retired.retiredAt}`, 'm'));
  const history = await cliIn(dir, ['history', 'old', ...store, '--json']);
  assert.equal(history.code, 0, history.stderr);
  assert.match(history.stdout, /NodeRetired/);

  const again = await cliIn(dir, ['node', 'retire', 'old', ...store]);
  assert.notEqual(again.code, 0);
  assert.match(again.stderr, /retired already/);
  const ghost = await cliIn(dir, ['node', 'retire', 'ghost', ...store]);
  assert.notEqual(ghost.code, 0);
  assert.match(ghost.stderr, /no event names node ghost/);

  const replay = await cliIn(dir, ['replay', '--verify', ...store]);
  assert.equal(replay.code, 0, replay.stdout + replay.stderr);
});
