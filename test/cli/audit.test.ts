import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { writeHistory } from '../support/auditHistory.ts';

// `converge audit verify` as an operator runs it (bin/converge.js, after npm run build): the
// defect was one UPDATE of a report's declared digest that status and replay --verify took as fact.

const bin = new URL('../../bin/converge.js', import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), 'converge-audit-cli-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const verify = (path: string, ...more: string[]) =>
  spawnSync(process.execPath, [bin, 'audit', 'verify', '--store', `sqlite:${path}`, ...more], { encoding: 'utf8' });

test('audit verify: 0 and intact on an untouched store, 1 naming the position of a changed digest, 2 when nothing can be read', async () => {
  const path = join(dir, 'store.db');
  const store = createSqliteEventStore(path);
  await writeHistory(store, 4);
  await store.close();

  const intact = verify(path);
  assert.equal(intact.status, 0, intact.stderr);
  assert.match(intact.stdout, /^intact: 12 events, root [0-9a-f]{64}$/m);

  const db = new Database(path);
  db.prepare("UPDATE events SET data = json_set(data, '$.declared', ?) WHERE position = 5").run('f'.repeat(64));
  db.close();
  const tampered = verify(path);
  assert.equal(tampered.status, 1, tampered.stderr);
  assert.match(tampered.stdout, /TAMPERED at position 5 \(changed\)/);
  const json = verify(path, '--json');
  assert.equal(json.status, 1);
  assert.deepEqual(JSON.parse(json.stdout).finding.kind, 'changed');
  // Not a terminal and no --progress: stderr stays quiet.
  assert.equal(tampered.stderr, '');

  const missing = verify(join(dir, 'nope.db'));
  assert.equal(missing.status, 2);
  assert.match(missing.stderr, /nothing was checked/);
  const usage = spawnSync(process.execPath, [bin, 'audit', 'check', '--store', `sqlite:${path}`], { encoding: 'utf8' });
  assert.equal(usage.status, 2);
});

test('audit verify --progress writes progress lines to stderr when it is not a terminal', async () => {
  const path = join(dir, 'big.db');
  const store = createSqliteEventStore(path);
  await writeHistory(store, 200);
  await store.close();
  const r = verify(path, '--progress');
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /intact: 600 events/);
  assert.match(r.stderr, /^audit verify: 600 \/ 600 events, [\d,]+\/s$/m);
});

test('audit verify --threads: one thread and two say the same; a count that is not one is refused as usage', async () => {
  const path = join(dir, 'threads.db');
  const store = createSqliteEventStore(path);
  await writeHistory(store, 20);
  await store.close();
  const db = new Database(path);
  db.prepare('DELETE FROM events WHERE position = 31').run();
  db.close();
  const one = verify(path, '--threads', '1', '--json');
  const two = verify(path, '--threads', '2', '--json');
  assert.equal(one.status, 1, one.stderr);
  assert.equal(two.status, 1, two.stderr);
  assert.equal(JSON.parse(one.stdout).finding.kind, 'gap');
  assert.deepEqual(JSON.parse(two.stdout), JSON.parse(one.stdout));
  const zero = verify(path, '--threads', '0');
  assert.equal(zero.status, 2);
  assert.match(zero.stderr, /--threads: expected a whole number from 1 to 64/);
});
