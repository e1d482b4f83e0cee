import assert from 'node:assert/strict';
import { test } from 'node:test';
import { apiHarness, read, write } from '../support/apiHarness.ts';
import { rolloutInStore } from '../support/rolloutInStore.ts';
import { readSse } from '../support/sse.ts';
import type { SseEvent } from '../support/sse.ts';

// The rollout routes over the harness (memory store, live projections). No driver
// runs here: the waves are opened and sent by rolloutInStore, as the driver would write them.

const spec = { resources: [{ id: 'web', image: 'nginx:1.27' }] };
const post = (url: string, body: unknown, headers: Record<string, string> = write) => ({
  method: 'POST' as const,
  url,
  headers: { ...headers, 'content-type': 'application/json' },
  payload: JSON.stringify(body),
});

test('start a rollout over the API, watch a stale report leave its node pending, then the matching one complete it', async (t) => {
  const h = await apiHarness();
  t.after(() => h.close());
  const before = await h.history.send('slow', [{ id: 'web', image: 'nginx:1.26' }]);
  await h.history.send('fast', [{ id: 'web', image: 'nginx:1.26' }]);
  await h.settle();

  assert.deepEqual((await h.app.inject({ url: '/v1/rollouts', headers: read })).json(), { count: 0, total: 0, rollouts: [] });
  const body = {
    rollout: 'r1',
    ...spec,
    selection: { kind: 'nodes', nodes: ['slow', 'fast'] },
    waves: '1,100%',
    maxFailures: '0',
    waveTimeoutMs: 600_000,
  };
  assert.equal((await h.app.inject(post('/v1/rollouts', body, read))).statusCode, 403, 'starting needs the send scope');
  const started = await h.app.inject(post('/v1/rollouts', body));
  assert.equal(started.statusCode, 202, started.body);
  assert.deepEqual(started.json(), { rollout: 'r1', targets: 2, waves: [1, 2] });
  assert.equal(started.headers.location, '/v1/rollouts/r1');
  // Read-your-writes: the rollout is in the view when the POST answers.
  const fresh = (await h.app.inject({ url: '/v1/rollouts/r1', headers: read })).json();
  assert.equal(fresh.status, 'running');
  assert.equal(fresh.current, 0);
  assert.match(fresh.startedBy, /^api token /);
  assert.deepEqual(fresh.selection, { kind: 'nodes' });

  const r = rolloutInStore(h.store, h.history, 'r1', []);
  assert.deepEqual(await r.run(), ['startWave', 'send', 'wait(1 node(s) of wave 1 still behind)']);
  h.history.tick(250);
  await h.history.report('slow', { applied: ['web'], declared: before.digest });
  await h.settle();
  let got = (await h.app.inject({ url: '/v1/rollouts/r1', headers: read })).json();
  assert.deepEqual(
    got.waves.map((w: { pending: number; done: number; unsent: number }) => [w.unsent, w.pending, w.done]),
    [
      [0, 1, 0],
      [1, 0, 0],
    ],
  );
  const nodes = (await h.app.inject({ url: '/v1/rollouts/r1/nodes?wave=1', headers: read })).json();
  assert.deepEqual(
    nodes.nodes.map((n: { node: string; outcome: string; detail: string }) => [n.node, n.outcome, n.detail]),
    [['slow', 'pending', `behind: the latest report names ${before.digest.slice(0, 12)} (stale)`]],
  );

  await h.history.report('slow', { applied: ['web'], declared: await r.digestSentTo('slow') });
  await h.settle();
  got = (await h.app.inject({ url: '/v1/rollouts/r1', headers: read })).json();
  assert.deepEqual([got.waves[0].pending, got.waves[0].done], [0, 1]);
  assert.deepEqual(got.convergence, { samples: 1, p50Ms: 250, p99Ms: 250 });

  const list = (await h.app.inject({ url: '/v1/rollouts?status=running', headers: read })).json();
  assert.deepEqual([list.count, list.rollouts[0].rollout], [1, 'r1']);
  assert.equal((await h.app.inject({ url: '/v1/rollouts?status=completed', headers: read })).json().count, 0);
});

test('pause, resume and abort answer with the rollout as it now stands; wrong states are 409, unknown ids 404, bad plans 400', async (t) => {
  const h = await apiHarness();
  t.after(() => h.close());
  await h.history.send('a');
  await h.history.send('b');
  await h.settle();
  const start = await h.app.inject(
    post('/v1/rollouts', { rollout: 'r2', ...spec, selection: { kind: 'all' }, waves: '100%', maxFailures: '0', waveTimeoutMs: 60_000 }),
  );
  assert.equal(start.statusCode, 202, start.body);
  assert.equal(start.json().targets, 2);

  const paused = await h.app.inject(post('/v1/rollouts/r2/pause', { reason: 'lunch' }));
  assert.equal(paused.statusCode, 200, paused.body);
  assert.equal(paused.json().status, 'paused');
  const again = await h.app.inject(post('/v1/rollouts/r2/pause', {}));
  assert.equal(again.statusCode, 409);
  assert.equal(again.json().code, 'CONVERGE_ERR_ROLLOUT_STATE');
  assert.equal((await h.app.inject(post('/v1/rollouts/r2/resume', {}))).json().status, 'running');
  const aborted = await h.app.inject(post('/v1/rollouts/r2/abort', { reason: 'wrong image' }));
  assert.equal(aborted.json().status, 'aborted');
  assert.deepEqual([aborted.json().aborted.reason, aborted.json().eta.ms], ['wrong image', null]);

  const missing = await h.app.inject({ url: '/v1/rollouts/nope', headers: read });
  assert.equal(missing.statusCode, 404);
  assert.equal(missing.json().code, 'CONVERGE_ERR_ROLLOUT_NOT_FOUND');
  assert.equal((await h.app.inject(post('/v1/rollouts/nope/abort', {}))).statusCode, 404);
  assert.equal((await h.app.inject({ url: '/v1/rollouts/Bad!', headers: read })).statusCode, 400);
  const badPlan = await h.app.inject(
    post('/v1/rollouts', { ...spec, selection: { kind: 'prefix', prefix: 'zzz' }, waves: '100%', maxFailures: '0', waveTimeoutMs: 1 }),
  );
  assert.equal(badPlan.statusCode, 400);
  assert.equal(badPlan.json().code, 'CONVERGE_ERR_ROLLOUT_PLAN');
  const noScope = await h.app.inject(post('/v1/rollouts/r2/pause', {}, read));
  assert.equal(noScope.statusCode, 403);
});

type EventData = { rollout?: string; node?: string; status: string; position: string };
const readEvents = (res: Response, until: (events: readonly SseEvent<EventData>[]) => boolean) => readSse<EventData>(res, until);

test(
  '/v1/events carries rollout changes as `event: rollout`; ?rollout= keeps only them, and a resume sends their current state',
  { timeout: 60_000 },
  async (t) => {
    const h = await apiHarness();
    t.after(() => h.close());
    const base = await h.app.listen({ port: 0, host: '127.0.0.1' });
    const r = rolloutInStore(h.store, h.history, 'r3', ['a']);

    // The server writes a stream's headers in the same turn as it registers its listeners, so once
    // both responses have arrived neither stream can miss the rollout (a fixed sleep here raced under
    // load: a stream opened after the rollout completed waited for ever).
    const [allRes, onlyRes] = await Promise.all([
      fetch(`${base}/v1/events`, { headers: read }),
      fetch(`${base}/v1/events?rollout=r3`, { headers: read }),
    ]);
    const all = readEvents(allRes, (es) => es.some((e) => e.event === 'rollout' && e.data.status === 'completed'));
    const only = readEvents(onlyRes, (es) => es.some((e) => e.data.status === 'completed'));
    await h.settle();
    await r.start();
    await r.run();
    await h.history.report('a', { applied: ['web'], declared: await r.digestSentTo('a') });
    await r.run();

    const mixed = await all;
    assert.ok(mixed.some((e) => e.event === 'node' && e.data.node === 'a'));
    const rolloutEvents = mixed.filter((e) => e.event === 'rollout');
    assert.equal(rolloutEvents[0]?.data.status, 'running');
    for (let i = 1; i < mixed.length; i++) assert.ok(BigInt(mixed[i]!.id) >= BigInt(mixed[i - 1]!.id), 'ids never go back');
    const filtered = await only;
    assert.ok(filtered.length > 0 && filtered.every((e) => e.event === 'rollout' && e.data.rollout === 'r3'));

    const resumed = await fetch(`${base}/v1/events?rollout=r3`, { headers: { ...read, 'last-event-id': rolloutEvents[0]!.id } });
    const [current] = await readEvents(resumed, (es) => es.length >= 1);
    assert.equal(current?.data.status, 'completed');
  },
);

test('12 pauses at once: one RolloutPaused recorded and one 200 showing it paused, the other 11 answer 409', async (t) => {
  const h = await apiHarness();
  t.after(() => h.close());
  await h.history.send('a');
  await h.settle();
  const body = { rollout: 'r12', ...spec, selection: { kind: 'all' }, waves: '100%', maxFailures: '0', waveTimeoutMs: 60_000 };
  assert.equal((await h.app.inject(post('/v1/rollouts', body))).statusCode, 202);
  const answers = await Promise.all(Array.from({ length: 12 }, () => h.app.inject(post('/v1/rollouts/r12/pause', {}))));
  const codes = answers.map((a) => a.statusCode).sort();
  assert.deepEqual(codes, [200, ...Array<number>(11).fill(409)]);
  assert.equal(answers.find((a) => a.statusCode === 200)?.json().status, 'paused');
  const recorded = (await h.store.readStream('rollout-r12')).filter((e) => e.type === 'RolloutPaused');
  assert.equal(recorded.length, 1);
  const resumes = await Promise.all(Array.from({ length: 12 }, () => h.app.inject(post('/v1/rollouts/r12/resume', {}))));
  const resumed = resumes.filter((a) => a.statusCode === 200);
  assert.equal(resumed.length, 1);
  assert.equal(resumed[0]?.json().status, 'running');
});

test('a wave timeout or pause past 30 days (or past the Date range) is refused with 400 naming the field; the reads stay whole', async (t) => {
  const h = await apiHarness();
  t.after(() => h.close());
  await h.history.send('a');
  await h.settle();
  const plan = (fields: Record<string, number>) =>
    post('/v1/rollouts', { ...spec, selection: { kind: 'all' }, waves: '100%', maxFailures: '0', waveTimeoutMs: 60_000, ...fields });
  const thirtyDays = 30 * 24 * 60 * 60 * 1000;
  for (const fields of [
    { waveTimeoutMs: Number.MAX_SAFE_INTEGER },
    { pauseMs: Number.MAX_SAFE_INTEGER },
    { waveTimeoutMs: thirtyDays + 1 },
    { pauseMs: thirtyDays + 1 },
  ]) {
    const r = await h.app.inject(plan(fields));
    assert.equal(r.statusCode, 400, `${JSON.stringify(fields)}: ${r.body}`);
    assert.match(r.body, new RegExp(Object.keys(fields)[0]!));
  }
  const longest = await h.app.inject(plan({ rollout: undefined as unknown as number, waveTimeoutMs: thirtyDays, pauseMs: thirtyDays }));
  assert.equal(longest.statusCode, 202, longest.body);
  // A store that already holds such a plan (recorded before plans were bounded) still reads: its deadline is null.
  const old = rolloutInStore(h.store, h.history, 'old', ['a'], { waveTimeoutMs: Number.MAX_SAFE_INTEGER });
  await old.start();
  await old.run();
  await h.settle();
  const list = await h.app.inject({ url: '/v1/rollouts', headers: read });
  assert.equal(list.statusCode, 200, list.body);
  assert.equal(list.json().count, 2);
  const got = await h.app.inject({ url: '/v1/rollouts/old', headers: read });
  assert.equal(got.statusCode, 200, got.body);
  assert.equal(got.json().waves[0].deadline, null);
});

test('abort criteria by class over the API: recorded as planned, shown with how each stands; bad ones refused, losing nothing', async (t) => {
  const h = await apiHarness();
  t.after(() => h.close());
  const base = { ...spec, selection: { kind: 'nodes', nodes: ['a', 'b', 'c'] }, waves: '100%', waveTimeoutMs: 600_000 };
  const both = await h.app.inject(post('/v1/rollouts', { ...base, rollout: 'x1', maxFailures: '1', abortOn: 'refused:1' }));
  assert.equal(both.statusCode, 400);
  assert.match(both.json().detail, /not both/);
  const wrong = await h.app.inject(post('/v1/rollouts', { ...base, rollout: 'x2', abortOn: 'refused+oops:1' }));
  assert.equal(wrong.statusCode, 400);
  assert.equal(wrong.json().code, 'CONVERGE_ERR_ROLLOUT_PLAN');
  assert.match(wrong.json().detail, /"oops" is not a failure class/);
  assert.equal((await h.app.inject({ url: '/v1/rollouts', headers: read })).json().total, 0, 'a refused plan records nothing');

  const ok = await h.app.inject(post('/v1/rollouts', { ...base, rollout: 'c1', abortOn: 'refused+degraded:50%@2,silent:1' }));
  assert.equal(ok.statusCode, 202, ok.body);
  const got = (await h.app.inject({ url: '/v1/rollouts/c1', headers: read })).json();
  assert.deepEqual(got.asGiven, { waves: '100%', maxFailures: '', abortOn: 'refused+degraded:50%@2,silent:1' });
  assert.deepEqual(got.criteria, [
    {
      asGiven: 'refused+degraded:50%@2',
      classes: ['refused', 'degraded'],
      count: null,
      percent: 50,
      minSettled: 2,
      failures: 0,
      allowed: null,
      settled: 0,
    },
    { asGiven: 'silent:1', classes: ['silent'], count: 1, percent: null, minSettled: 0, failures: 0, allowed: 1, settled: 0 },
  ]);
});

test('rollback over the API: rollbackOnHalt recorded as planned; POST rollback answers 200 rolling back, then 409; unknown 404', async (t) => {
  const h = await apiHarness();
  t.after(() => h.close());
  const body = {
    rollout: 'rb1',
    ...spec,
    selection: { kind: 'nodes', nodes: ['a', 'b'] },
    waves: '1,100%',
    waveTimeoutMs: 600_000,
    rollbackOnHalt: 'wave',
  };
  assert.equal((await h.app.inject(post('/v1/rollouts', { ...body, rollout: 'rb0', rollbackOnHalt: 'some' }))).statusCode, 400);
  assert.equal((await h.app.inject(post('/v1/rollouts', body))).statusCode, 202);
  const got = (await h.app.inject({ url: '/v1/rollouts/rb1', headers: read })).json();
  assert.deepEqual([got.rollbackOnHalt, got.rollback], ['wave', null]);

  assert.equal((await h.app.inject(post('/v1/rollouts/rb1/rollback', { scope: 'some' }))).statusCode, 400);
  assert.equal((await h.app.inject(post('/v1/rollouts/rb1/rollback', {}, read))).statusCode, 403, 'rolling back needs the send scope');
  const back = await h.app.inject(post('/v1/rollouts/rb1/rollback', { reason: 'bad image' }));
  assert.equal(back.statusCode, 200, back.body);
  const r = back.json();
  assert.equal(r.status, 'rollingBack');
  assert.deepEqual(
    [r.rollback.scope, r.rollback.reason, r.rollback.targets, r.rollback.completedAt],
    ['all', 'bad image', 0, null],
    'nothing was sent yet: nothing to roll back',
  );
  assert.match(r.rollback.by, /^api token /);
  const again = await h.app.inject(post('/v1/rollouts/rb1/rollback', {}));
  assert.equal(again.statusCode, 409);
  assert.equal(again.json().code, 'CONVERGE_ERR_ROLLOUT_STATE');
  assert.equal((await h.app.inject(post('/v1/rollouts/rb1/pause', {}))).statusCode, 409, 'a rollback is not paused');
  assert.equal((await h.app.inject(post('/v1/rollouts/nope/rollback', {}))).statusCode, 404);
  const list = (await h.app.inject({ url: '/v1/rollouts?status=rollingBack', headers: read })).json();
  assert.deepEqual(
    list.rollouts.map((x: { rollout: string }) => x.rollout),
    ['rb1'],
  );
});
