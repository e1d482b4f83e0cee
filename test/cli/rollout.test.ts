import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { cliIn } from '../support/cliInProcess.ts';
import type { CliResult } from '../support/cliInProcess.ts';
import { historyInStore } from '../support/history.ts';
import type { StoreHistory } from '../support/history.ts';
import { rolloutInStore } from '../support/rolloutInStore.ts';

// `converge rollout …` and `converge rollouts` on a SQLite store, in process.
// No engine runs: the waves are opened and sent by rolloutInStore, as the driver would.

let dir: string;
let env: Record<string, string>;

const cli = (args: readonly string[]): Promise<CliResult> => cliIn(dir, args, { ...env, USER: 'ops' });

let store: EventStore;
let h: StoreHistory;
let previous: string;

describe('converge rollout on a SQLite store', () => {
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'converge-rollout-cli-'));
    env = { CONVERGE_STORE: `sqlite:${join(dir, 'store.db')}` };
    writeFileSync(join(dir, 'spec.json'), JSON.stringify({ resources: [{ id: 'web', image: 'nginx:1.27' }] }));
    store = createSqliteEventStore(join(dir, 'store.db'));
    h = historyInStore(store);
    previous = (await h.send('n1', [{ id: 'web', image: 'nginx:1.26' }])).digest;
    await h.send('n2');
    await h.send('n3');
    await h.send('other');
  });

  after(async () => {
    try {
      await store.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('start takes exactly one selection, a wave timeout and durations people write; mistakes are usage errors', async () => {
    const none = await cli(['rollout', 'start', 'spec.json', '--wave-timeout', '10m']);
    assert.equal(none.code, 2);
    assert.match(none.stderr, /exactly one of --nodes a,b, --all, --spec <digest>, --prefix <p>/);
    assert.equal((await cli(['rollout', 'start', 'spec.json', '--all', '--prefix', 'n', '--wave-timeout', '1m'])).code, 2);
    const noTimeout = await cli(['rollout', 'start', 'spec.json', '--all']);
    assert.equal(noTimeout.code, 2);
    assert.match(noTimeout.stderr, /--wave-timeout/);
    const badDuration = await cli(['rollout', 'start', 'spec.json', '--all', '--wave-timeout', 'soon']);
    assert.equal(badDuration.code, 2);
    assert.match(badDuration.stderr, /like 30s, 10m, 1h or 1500ms/);
    assert.equal((await cli(['rollout', 'fly', 'x'])).code, 2);
    assert.equal((await cli(['rollout', 'status', 'x', '--all'])).code, 2);
    const elsewhere = { ...env };
    env = { CONVERGE_STORE: `sqlite:${join(dir, 'missing', 'store.db')}` };
    assert.equal(
      (await cli(['rollout', 'start', 'spec.json', '--all', '--wave-timeout', '1m'])).code,
      1,
      'a selection from the fleet needs a store',
    );
    const fresh = await cli(['rollout', 'start', 'spec.json', '--nodes', 'x1,x2', '--wave-timeout', '1m', '--json']);
    assert.equal(fresh.code, 1, 'a list of nodes does not start a new store either: only serve and demo create one');
    assert.match(fresh.stderr, /missing\/store\.db does not exist/);
    env = elsewhere;
    const noTarget = await cli(['rollout', 'start', 'spec.json', '--prefix', 'zz', '--wave-timeout', '1m']);
    assert.equal(noTarget.code, 1);
    assert.match(noTarget.stderr, /no node to roll out to/);
  });

  test('start, status, rollouts, pause, resume, explain: the story of a rollout with the seed race in it', async () => {
    const started = await cli([
      'rollout',
      'start',
      'spec.json',
      '--prefix',
      'n',
      '--waves',
      '1,100%',
      '--max-failures',
      '1',
      '--wave-timeout',
      '10m',
      '--pause',
      '30s',
      '--id',
      'r1',
      '--json',
    ]);
    assert.equal(started.code, 0, started.stderr);
    assert.deepEqual(JSON.parse(started.stdout), { rollout: 'r1', targets: 3, waves: [1, 3] });

    const r = rolloutInStore(store, h, 'r1', []);
    assert.deepEqual(await r.run(), ['startWave', 'send', 'wait(1 node(s) of wave 1 still behind)']);
    h.tick(300);
    await h.report('n1', { applied: ['web'], declared: previous });
    const status = await cli(['rollout', 'status', 'r1', '--json']);
    assert.equal(status.code, 0, status.stderr);
    const s = JSON.parse(status.stdout);
    assert.deepEqual(
      [s.status, s.startedBy, s.waves[0].pending, s.waves[0].done, s.pauseMs, s.waveTimeoutMs],
      ['running', 'cli ops', 1, 0, 30_000, 600_000],
    );

    h.tick(200);
    await h.report('n1', { applied: ['web'], declared: await r.digestSentTo('n1') });
    const text = await cli(['rollout', 'status', 'r1']);
    assert.match(text.stdout, /^rollout +r1 {2}running {2}\(wave 1 of 2\)$/m);
    assert.match(text.stdout, /^plan +waves 1,100% = 1, 3; failures allowed 1 \(1\); wave timeout 10m; pause 30s$/m);
    assert.match(text.stdout, /^latency +p50 500 ms {2}p99 500 ms {2}\(1 node\(s\)\)$/m);
    assert.match(text.stdout, /^1 +1 +1 +0 +0 +0 +0 +open, (times out|past its timeout) /m);
    assert.match(text.stdout, /^2 +2 +0 +0 +0 +0 +2 +waiting$/m);

    assert.equal((await cli(['rollout', 'pause', 'r1', '--reason', 'lunch'])).stdout, 'rollout r1 paused\n');
    const twice = await cli(['rollout', 'pause', 'r1']);
    assert.equal(twice.code, 1);
    assert.match(twice.stderr, /paused already/);
    const list = await cli(['rollouts', '--status', 'paused', '--json']);
    assert.deepEqual(
      list.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).rollout),
      ['r1'],
    );
    assert.equal((await cli(['rollouts', '--status', 'done'])).code, 2);
    assert.equal((await cli(['rollout', 'resume', 'r1'])).stdout, 'rollout r1 running\n');

    assert.deepEqual(await r.run(), ['completeWave', 'wait(pause before wave 2)']);
    h.tick(30_000);
    assert.deepEqual(await r.run(), ['startWave', 'send', 'wait(2 node(s) of wave 2 still behind)']);
    await h.report('n2', { refused: 'no room', declared: await r.digestSentTo('n2') });
    await h.report('n3', { applied: ['web'], declared: await r.digestSentTo('n3') });
    // --watch follows the store until the rollout ends: the last step is written while it watches.
    const watching = cli(['rollout', 'status', 'r1', '--watch', '--json']);
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.deepEqual(await r.run(), ['completeWave', 'complete', 'wait(completed)']);
    const watched = await watching;
    assert.equal(watched.code, 0, watched.stderr);
    const seen = watched.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.equal(seen.at(-1).status, 'completed');
    assert.deepEqual(seen.at(-1).totals, { unsent: 0, pending: 0, done: 2, failed: 1, superseded: 0 });

    const explain = await cli(['rollout', 'explain', 'r1']);
    assert.equal(explain.code, 0, explain.stderr);
    const lines = explain.stdout.trim().split('\n');
    assert.match(lines[0]!, /started by cli ops: spec [0-9a-f]{12} to 3 node\(s\) \(ids starting "n"\), waves 1,100% = 1, 3 cumulative/);
    assert.ok(
      lines.some((l) => /wave 1: n1 stale report .* the clock rule would have counted it done, the digest rule keeps it pending/.test(l)),
    );
    assert.ok(
      lines.some((l) => /wave 1: n1 done: its report names [0-9a-f]{12} \(serial 2, position \d+\), 500 ms after the send/.test(l)),
    );
    assert.ok(
      lines.some((l) =>
        /wave 2 opened \(2 nodes, targets 2–3\) because 1 of 1 node\(s\) of wave 1 reported the digest this rollout sent them; the last, n1, reported/.test(
          l,
        ),
      ),
    );
    assert.ok(lines.some((l) => /wave 2: n2 refused: no room$/.test(l)));
    assert.match(lines.at(-1)!, /completed: 2 done, 1 failed, 0 superseded/);
    const entries = (await cli(['rollout', 'explain', 'r1', '--json'])).stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l).kind);
    assert.equal(entries.filter((k) => k === 'staleReport').length, 1);

    const missing = await cli(['rollout', 'status', 'nope']);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /no rollout named "nope"/);
  });

  test('status lists the failed nodes by class; rollback rolls back once, then is refused; a bad policy is a usage error', async () => {
    const status = await cli(['rollout', 'status', 'r1']);
    assert.match(status.stdout, /^NODE +WAVE +CLASS +DETAIL$/m);
    assert.match(status.stdout, /^n2 +2 +refused +refused: no room$/m);
    assert.match(status.stdout, /^rollback +-$/m);

    const bad = await cli(['rollout', 'start', 'spec.json', '--all', '--wave-timeout', '1m', '--rollback-on-halt', 'sometimes']);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--rollback-on-halt is none, wave or all/);
    assert.equal((await cli(['rollout', 'pause', 'r1', '--scope', 'wave'])).code, 2, '--scope is for rollback');

    const back = await cli(['rollout', 'rollback', 'r1', '--scope', 'wave', '--reason', 'bad image']);
    assert.equal(back.code, 0, back.stderr);
    assert.equal(back.stdout, 'rollout r1 rollingBack\n');
    const shown = await cli(['rollout', 'status', 'r1']);
    assert.match(shown.stdout, /^rollback +wave 2, by cli ops at .*: 0 of 2 rolled back, 0 pending, 0 failed; sending$/m);
    const again = await cli(['rollout', 'rollback', 'r1']);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /rolling back already/);
  });
});
