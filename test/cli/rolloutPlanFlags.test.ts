import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { foldRolloutEvents } from '../../projections/index.ts';
import { rolloutStreamOf } from '../../src/core/events/index.ts';
import type { Recorded, RolloutEvent } from '../../src/core/events/index.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { cliIn } from '../support/cliInProcess.ts';
import { historyInStore } from '../support/history.ts';

// `rollout start --rate/--ramp/--gate-url` record what they say in the plan (docs/design.md §8
// "Rate", "Gates"), and what cannot be a plan is a usage or plan error.

const dir = mkdtempSync(join(tmpdir(), 'converge-rollout-plan-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const env = { CONVERGE_STORE: `sqlite:${join(dir, 'store.db')}`, USER: 'ops' };

before(async () => {
  writeFileSync(join(dir, 'spec.json'), JSON.stringify({ resources: [{ id: 'web', image: 'nginx:2' }] }));
  const store = createSqliteEventStore(join(dir, 'store.db'));
  await historyInStore(store).send('n1');
  await store.close();
});

async function plan(id: string) {
  const store = createSqliteEventStore(join(dir, 'store.db'));
  try {
    return foldRolloutEvents((await store.readStream(rolloutStreamOf(id))) as Recorded<RolloutEvent>[])!.started;
  } finally {
    await store.close();
  }
}

const start = (id: string, ...flags: string[]) =>
  cliIn(dir, ['rollout', 'start', 'spec.json', '--nodes', 'n1', '--wave-timeout', '1m', '--id', id, ...flags], env);

test('--rate, --ramp and --gate-url are recorded in the plan', async () => {
  assert.equal((await start('r1', '--rate', '30')).code, 0);
  assert.deepEqual((await plan('r1')).rate, { perMinute: 30 });
  assert.equal((await start('r2', '--ramp', '10,2,200,5m')).code, 0);
  assert.deepEqual((await plan('r2')).ramp, { base: 10, factor: 2, cap: 200, everyMs: 300_000 });
  assert.equal((await start('r3', '--gate-url', 'http://127.0.0.1:9/gate', '--gate-timeout', '3s')).code, 0);
  assert.deepEqual((await plan('r3')).gate, { url: 'http://127.0.0.1:9/gate', timeoutMs: 3_000 });
});

test('a plan that cannot be is refused before anything is recorded', async () => {
  assert.equal((await start('x1', '--rate', '30', '--ramp', '1,2,3,1m')).code, 2);
  assert.equal((await start('x2', '--rate', 'fast')).code, 2);
  assert.equal((await start('x3', '--ramp', '10,2')).code, 2);
  assert.equal((await start('x4', '--gate-timeout', '3s')).code, 2);
  const badRamp = await start('x5', '--ramp', '10,2,5,1m');
  assert.equal(badRamp.code, 1);
  assert.match(badRamp.stderr, /cap >= base/);
  const badGate = await start('x6', '--gate-url', 'ftp://x/gate');
  assert.equal(badGate.code, 1);
  assert.match(badGate.stderr, /http\(s\) url/);
});
