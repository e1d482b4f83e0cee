import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { stateAtResponse } from '../../src/api/schemas.ts';
import { apiHarness, read, write } from '../support/apiHarness.ts';

describe('history and state', () => {
  test("history lists a node's events newest first with positions, and pages with next", async (t) => {
    const h = await apiHarness();
    t.after(() => h.close());
    for (let i = 0; i < 5; i++) {
      h.history.tick();
      await h.history.alive('h1');
    }
    const page1 = (await h.app.inject({ url: '/v1/nodes/h1/history?limit=3', headers: read })).json();
    assert.equal(page1.events.length, 3);
    const positions = page1.events.map((e: { position: string }) => BigInt(e.position));
    assert.ok(positions[0] > positions[1] && positions[1] > positions[2]);
    assert.equal(page1.next, page1.events[2].position);
    const page2 = (await h.app.inject({ url: `/v1/nodes/h1/history?limit=3&before=${page1.next}`, headers: read })).json();
    assert.equal(page2.events.length, 2);
    assert.equal(page2.next, null);
    assert.equal(page2.events[0].type, 'AliveSeen');
  });

  test('history of an unknown node is 404 and a bad limit is 400', async (t) => {
    const h = await apiHarness();
    t.after(() => h.close());
    assert.equal((await h.app.inject({ url: '/v1/nodes/ghost/history', headers: read })).json().code, 'CONVERGE_ERR_NODE_NOT_FOUND');
    const bad = await h.app.inject({ url: '/v1/nodes/ghost/history?limit=0', headers: read });
    assert.equal(bad.statusCode, 400);
    assert.equal(bad.json().code, 'CONVERGE_ERR_BAD_REQUEST');
  });

  test("state at a time between A's stale report and B's report says behind", async (t) => {
    const h = await apiHarness();
    t.after(() => h.close());
    const a = await h.history.send('r1');
    h.history.tick(1000);
    const b = await h.history.send('r1');
    h.history.tick(1000);
    await h.history.report('r1', { declared: a.digest, applied: ['web'] }); // the seed's race: A's report after B's send
    const between = h.history.tick(1000).toISOString();
    h.history.tick(1000);
    await h.history.report('r1', { declared: b.digest, applied: ['web'] });
    await h.settle();
    const r = (await h.app.inject({ url: `/v1/nodes/r1/state?at=${encodeURIComponent(between)}`, headers: read })).json();
    assert.equal(r.state.status, 'behind');
    assert.equal(r.state.caughtUp, false);
    assert.equal(r.state.anomalies.stale, 1);
    assert.equal(r.folded, 3);
    const now = (await h.app.inject({ url: '/v1/nodes/r1', headers: read })).json();
    assert.equal(now.status, 'converged');
  });

  test('state at a position stops the fold there', async (t) => {
    const h = await apiHarness();
    t.after(() => h.close());
    const a = await h.history.send('p1');
    await h.history.report('p1', { declared: a.digest, applied: ['web'] });
    const r = (await h.app.inject({ url: `/v1/nodes/p1/state?at=${a.position}`, headers: read })).json();
    assert.equal(r.folded, 1);
    assert.equal(r.state.status, 'behind');
  });

  test("state before the node's first event is undeclared with a decimal position, as the schema says", async (t) => {
    const h = await apiHarness();
    t.after(() => h.close());
    const early = h.history.now().toISOString();
    h.history.tick(1000);
    await h.history.send('e1');
    const r = (await h.app.inject({ url: `/v1/nodes/e1/state?at=${encodeURIComponent(early)}`, headers: read })).json();
    assert.equal(r.folded, 0);
    assert.equal(r.state.status, 'undeclared');
    assert.match(r.state.position, /^\d{1,20}$/);
    assert.ok(stateAtResponse.safeParse(r).success, JSON.stringify(r.state.position));
  });

  test('state with an `at` that is neither time nor position is 400', async (t) => {
    const h = await apiHarness();
    t.after(() => h.close());
    await h.history.alive('p2');
    const r = await h.app.inject({ url: '/v1/nodes/p2/state?at=yesterday', headers: read });
    assert.equal(r.statusCode, 400);
    assert.equal(r.json().code, 'CONVERGE_ERR_BAD_REQUEST');
  });
});

describe('declarations', () => {
  test('POST signs, records and answers 202 with digest and serial, visible at once', async (t) => {
    const h = await apiHarness();
    t.after(() => h.close());
    const r = await h.app.inject({
      method: 'POST',
      url: '/v1/nodes/d1/declarations',
      headers: write,
      payload: { resources: [{ id: 'web', ports: [8080] }] },
    });
    assert.equal(r.statusCode, 202);
    const body = r.json();
    assert.match(body.digest, /^[0-9a-f]{64}$/);
    assert.equal(body.serial, 1);
    const node = (await h.app.inject({ url: '/v1/nodes/d1', headers: read })).json();
    assert.equal(node.sent.digest, body.digest);
  });

  test('a spec with duplicate resource ids is 400 CONVERGE_ERR_SPEC_DUPLICATE_ID', async (t) => {
    const h = await apiHarness();
    t.after(() => h.close());
    const r = await h.app.inject({
      method: 'POST',
      url: '/v1/nodes/d1/declarations',
      headers: write,
      payload: { resources: [{ id: 'a' }, { id: 'a' }] },
    });
    assert.equal(r.statusCode, 400);
    assert.equal(r.json().code, 'CONVERGE_ERR_SPEC_DUPLICATE_ID');
  });

  test('a body that is not JSON is a 400 problem', async (t) => {
    const h = await apiHarness();
    t.after(() => h.close());
    const r = await h.app.inject({
      method: 'POST',
      url: '/v1/nodes/d1/declarations',
      headers: { ...write, 'content-type': 'application/json' },
      payload: '{nope',
    });
    assert.equal(r.statusCode, 400);
    assert.equal(r.json().code, 'CONVERGE_ERR_BAD_REQUEST');
  });

  test('without any configured token, reads are open and writes are 401', async (t) => {
    const { parseApiTokens } = await import('../../src/api/index.ts');
    const h = await apiHarness({ tokens: parseApiTokens('').table });
    t.after(() => h.close());
    await h.history.alive('o1');
    assert.equal((await h.app.inject({ url: '/v1/nodes/o1' })).statusCode, 200);
    const w = await h.app.inject({ method: 'POST', url: '/v1/nodes/o1/declarations', payload: { resources: [] } });
    assert.equal(w.statusCode, 401);
  });
});

describe('await', () => {
  test('resolves the moment the projection sees the matching report', async (t) => {
    const h = await apiHarness();
    t.after(() => h.close());
    const a = await h.history.send('w1');
    await h.settle();
    const pending = h.app.inject({ url: `/v1/nodes/w1/await?digest=${a.digest}&timeoutMs=60000`, headers: read });
    // a stale-looking report for another digest does not resolve it
    await h.history.report('w1', { declared: null });
    await h.settle();
    await h.history.report('w1', { declared: a.digest, applied: ['web'] });
    const r = await pending;
    assert.equal(r.statusCode, 200);
    assert.equal(r.json().caughtUp, true);
    assert.equal(r.json().reported.declared, a.digest);
  });

  test('without a digest it waits for the latest sent', async (t) => {
    const h = await apiHarness();
    t.after(() => h.close());
    const a = await h.history.send('w2');
    await h.settle();
    const pending = h.app.inject({ url: '/v1/nodes/w2/await?timeoutMs=60000', headers: read });
    await h.history.report('w2', { declared: a.digest, applied: ['web'] });
    assert.equal((await pending).statusCode, 200);
  });

  test('times out with 408 and says what the node reported', async (t) => {
    const h = await apiHarness();
    t.after(() => h.close());
    const a = await h.history.send('w3');
    await h.history.send('w3');
    await h.history.report('w3', { declared: a.digest });
    await h.settle();
    const r = await h.app.inject({ url: '/v1/nodes/w3/await?timeoutMs=20', headers: read });
    assert.equal(r.statusCode, 408);
    assert.equal(r.json().code, 'CONVERGE_ERR_AWAIT_TIMEOUT');
    assert.equal(r.json().details.reported, a.digest);
  });

  test('an unknown node is 404 and a bad digest is 400', async (t) => {
    const h = await apiHarness();
    t.after(() => h.close());
    assert.equal((await h.app.inject({ url: '/v1/nodes/ghost/await?timeoutMs=10', headers: read })).statusCode, 404);
    await h.history.alive('w4');
    await h.settle();
    const bad = await h.app.inject({ url: '/v1/nodes/w4/await?digest=abc', headers: read });
    assert.equal(bad.statusCode, 400);
  });
});

describe('operations routes', () => {
  const hs: Awaited<ReturnType<typeof apiHarness>>[] = [];
  after(async () => {
    for (const h of hs) await h.close();
  });

  test('/metrics exposes the docs/design.md §7 series with nodes by status and liveness', async () => {
    const h = await apiHarness();
    hs.push(h);
    const a = await h.history.send('m1');
    await h.history.report('m1', { declared: a.digest, applied: ['web'] });
    await h.settle();
    const r = await h.app.inject({ url: '/metrics' });
    assert.equal(r.statusCode, 200);
    assert.match(r.body, /converge_nodes\{status="converged",liveness="connected"\} 1/);
    assert.match(r.body, /converge_projection_lag_events 0/);
    assert.match(r.body, /converge_convergence_seconds_count 1/);
  });

  test('/healthz and /readyz report readiness and lag', async () => {
    const h = await apiHarness();
    hs.push(h);
    const health = (await h.app.inject({ url: '/healthz' })).json();
    assert.equal(health.ok, true);
    assert.equal(health.ready, true);
    assert.equal(health.lag, '0');
    assert.equal((await h.app.inject({ url: '/readyz' })).statusCode, 200);
  });

  test('/readyz is 503 while projections catch up', async () => {
    const h = await apiHarness({ projections: { isReady: () => false, lag: async () => 42n } });
    hs.push(h);
    const r = await h.app.inject({ url: '/readyz' });
    assert.equal(r.statusCode, 503);
    assert.equal(r.json().code, 'CONVERGE_ERR_NOT_READY');
  });

  test('an exact last-seen time from the ingest wins over an older folded one', async () => {
    let exact: Date | null = null;
    const h = await apiHarness({ lastSeen: () => exact });
    hs.push(h);
    await h.history.alive('ls1');
    h.history.tick(120_000);
    await h.settle();
    assert.equal((await h.app.inject({ url: '/v1/nodes/ls1', headers: read })).json().liveness.state, 'disconnected');
    exact = h.history.now(); // coalesced alive: seen in memory, not yet appended (docs/design.md §2)
    const v = (await h.app.inject({ url: '/v1/nodes/ls1', headers: read })).json();
    assert.equal(v.liveness.state, 'connected');
    assert.equal(v.liveness.lastSeenAt, exact.toISOString());
  });
});
