import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { cliIn } from '../support/cliInProcess.ts';
import { historyInStore } from '../support/history.ts';
import { readYaml } from '../support/yamlReader.ts';

// `converge status` and `state` print the node's conditions (docs/api.md#conditions): in -o json
// and yaml as the API answers them, in text as a line of reasons and the Converged message.

type Condition = { type: string; status: string; reason: string; lastTransitionTime: string | null };

let dir: string;
let env: Record<string, string>;
let sentAt: string;
const cli = (args: readonly string[]) => cliIn(dir, args, env);

describe('conditions in the CLI', () => {
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'converge-conditions-'));
    env = { CONVERGE_STORE: `sqlite:${join(dir, 'store.db')}` };
    const store = createSqliteEventStore(join(dir, 'store.db'));
    const script = historyInStore(store);
    const a = await script.send('n1', [{ id: 'web' }, { id: 'db' }]);
    sentAt = script.now().toISOString();
    script.tick();
    await script.report('n1', { declared: a.digest, applied: ['web'], failed: { db: 'disk full' } });
    await store.close();
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('status <node> -o json carries the conditions', async () => {
    const r = await cli(['status', 'n1', '-o', 'json']);
    assert.equal(r.code, 0, r.stderr);
    const v = JSON.parse(r.stdout) as { conditions: Condition[] };
    // Connected depends on the reader's clock against the scripted history's: left out.
    assert.deepEqual(
      v.conditions.slice(0, 2).map((c) => `${c.type}=${c.status}:${c.reason}`),
      ['Converged=False:ResourcesFailed', 'CaughtUp=True:Acknowledged'],
    );
    assert.equal(v.conditions[2]!.type, 'Connected');
  });

  test('state --at -o yaml carries them as of that moment', async () => {
    const r = await cli(['state', 'n1', '--at', sentAt, '-o', 'yaml']);
    assert.equal(r.code, 0, r.stderr);
    const v = readYaml(r.stdout) as { state: { conditions: Condition[] } };
    assert.deepEqual(v.state.conditions[0], {
      type: 'Converged',
      status: 'False',
      reason: 'NotReported',
      message: `sent serial 1 at ${sentAt}, no report yet`,
      lastTransitionTime: sentAt,
    });
  });

  test('status <node> in text names the reasons and says why it is not converged', async () => {
    const r = await cli(['status', 'n1']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /conditions\s+Converged=False ResourcesFailed, CaughtUp=True Acknowledged, Connected=/);
    assert.match(r.stdout, /why\s+serial 1: db: disk full/);
  });
});
