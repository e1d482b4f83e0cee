import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { readDeclaration } from '../../src/core/declaration/index.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { cliIn } from '../support/cliInProcess.ts';
import type { CliResult } from '../support/cliInProcess.ts';
import { historyInStore } from '../support/history.ts';
import { rolloutFleet } from '../support/rolloutFleet.ts';
import { until } from '../support/until.ts';

// `converge rollout start --as-of <time|position>` on a SQLite store, in process: the plan is
// recorded by the CLI, and the engine's driver (on the same store) sends each node its spec then.

let dir: string;
let env: Record<string, string>;

const cli = (args: readonly string[]): Promise<CliResult> => cliIn(dir, args, { ...env, USER: 'ops' });

const v1 = [{ id: 'web', image: 'nginx:1.26' }];
let store: EventStore;
let position: bigint;

describe('converge rollout start --as-of', () => {
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'converge-rollout-asof-'));
    env = { CONVERGE_STORE: `sqlite:${join(dir, 'store.db')}` };
    writeFileSync(join(dir, 'spec.json'), JSON.stringify({ resources: [{ id: 'web', image: 'nginx:1.27' }] }));
    store = createSqliteEventStore(join(dir, 'store.db'));
    const h = historyInStore(store);
    await h.send('n1', v1);
    position = (await store.headPosition())!;
    h.tick(60_000);
    await h.send('n1', [{ id: 'web', image: 'nginx:1.27' }]);
    await h.send('n2');
  });
  after(async () => {
    try {
      await store.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a spec file and --as-of together, neither, or --as-of on another verb are usage errors', async () => {
    const both = await cli(['rollout', 'start', 'spec.json', '--as-of', '1', '--all', '--wave-timeout', '1m']);
    assert.equal(both.code, 2);
    assert.match(both.stderr, /a spec file or --as-of <time\|position>, not both/);
    const neither = await cli(['rollout', 'start', '--all', '--wave-timeout', '1m']);
    assert.equal(neither.code, 2);
    assert.match(neither.stderr, /needs a spec file \(or - for stdin\), or --as-of/);
    assert.equal((await cli(['rollout', 'status', 'x', '--as-of', '1'])).code, 2);
    assert.equal((await cli(['rollout', 'status'])).code, 2);
  });

  test('--as-of a store position: the driver sends n1 its spec then and skips n2, sent nothing by then', async () => {
    const started = await cli([
      'rollout',
      'start',
      '--as-of',
      String(position),
      '--nodes',
      'n1,n2',
      '--wave-timeout',
      '1m',
      '--id',
      'back',
    ]);
    assert.equal(started.code, 0, started.stderr);
    const status = await cli(['rollout', 'status', 'back']);
    assert.match(status.stdout, new RegExp(`each node's own as of position ${position}, to 2 node\\(s\\)`));
    const f = await rolloutFleet({ store });
    try {
      await until('n1 restored and n2 skipped', async () => {
        const types = (await f.events('back')).map((e) => e.type);
        return types.includes('RolloutSent') && (await f.rollout('back')).status === 'completed';
      });
      const ours = (await f.sentTo('n1')).filter((e) => e.data.rollout?.id === 'back');
      assert.equal(ours.length, 1);
      assert.deepEqual(readDeclaration(Buffer.from(ours[0]!.data.declaration, 'base64')).resources, v1);
      assert.equal((await f.sentTo('n2')).filter((e) => e.data.rollout?.id === 'back').length, 0);
      const explained = await cli(['rollout', 'explain', 'back']);
      assert.match(explained.stdout, /n2: had been sent nothing at or before position/);
    } finally {
      await f.stop();
    }
  });

  test('--as-of a time long gone: every node skipped, the plan recorded with that time', async () => {
    const r = await cli([
      'rollout',
      'start',
      '--as-of',
      '2000-01-01T00:00:00Z',
      '--nodes',
      'n1',
      '--wave-timeout',
      '1m',
      '--id',
      'y2k',
      '--json',
    ]);
    assert.equal(r.code, 0, r.stderr);
    const status = await cli(['rollout', 'status', 'y2k', '--json']);
    assert.deepEqual(JSON.parse(status.stdout).asOf, { at: '2000-01-01T00:00:00.000Z', position: null });
    const bad = await cli(['rollout', 'start', '--as-of', 'last tuesday', '--nodes', 'n1', '--wave-timeout', '1m']);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /neither an ISO 8601 time nor a decimal position/);
  });
});
