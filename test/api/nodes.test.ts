import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { apiHarness, read } from '../support/apiHarness.ts';
import type { ApiHarness } from '../support/apiHarness.ts';

describe('node routes', () => {
  let h: ApiHarness;
  before(async () => {
    h = await apiHarness();
    const a = await h.history.send('n1');
    h.history.tick();
    await h.history.report('n1', { declared: a.digest, applied: ['web'] });
    await h.history.send('n2');
    await h.history.alive('n3');
    await h.settle();
  });
  after(() => h.close());

  test('GET /v1/nodes/:node answers the docs/design.md §7 shape for a converged node', async () => {
    const r = await h.app.inject({ url: '/v1/nodes/n1', headers: read });
    assert.equal(r.statusCode, 200);
    const body = r.json();
    assert.equal(body.node, 'n1');
    assert.equal(body.status, 'converged');
    assert.equal(body.caughtUp, true);
    assert.equal(body.sent.serial, 1);
    assert.equal(body.reported.declared, body.sent.digest);
    assert.equal(body.liveness.state, 'connected');
    assert.deepEqual(body.anomalies, { stale: 0, unknown: 0, undeclared: 0 });
    assert.match(body.position, /^\d+$/);
  });

  test('a node never heard of is a 404 problem with a stable code', async () => {
    const r = await h.app.inject({ url: '/v1/nodes/ghost', headers: read });
    assert.equal(r.statusCode, 404);
    assert.match(r.headers['content-type'] as string, /^application\/problem\+json/);
    assert.equal(r.json().code, 'CONVERGE_ERR_NODE_NOT_FOUND');
    assert.equal(r.json().status, 404);
  });

  test('GET /v1/nodes filters by status and liveness', async () => {
    const all = (await h.app.inject({ url: '/v1/nodes', headers: read })).json();
    assert.deepEqual(
      all.nodes.map((n: { node: string }) => n.node),
      ['n1', 'n2', 'n3'],
    );
    const behind = (await h.app.inject({ url: '/v1/nodes?status=behind', headers: read })).json();
    assert.deepEqual(
      behind.nodes.map((n: { node: string }) => n.node),
      ['n2'],
    );
    const never = (await h.app.inject({ url: '/v1/nodes?liveness=never-seen', headers: read })).json();
    assert.deepEqual(
      never.nodes.map((n: { node: string }) => n.node),
      ['n2'],
    );
  });

  test('GET /v1/nodes filters by digest, sent or running', async () => {
    const digest = h.runner.readModel.get('n2')?.sent?.digest ?? '';
    const r = (await h.app.inject({ url: `/v1/nodes?digest=${digest}`, headers: read })).json();
    assert.deepEqual(
      r.nodes.map((n: { node: string }) => n.node),
      ['n2'],
    );
  });

  test('a bad query value is a 400 with CONVERGE_ERR_BAD_REQUEST naming the field', async () => {
    const r = await h.app.inject({ url: '/v1/nodes?status=sideways', headers: read });
    assert.equal(r.statusCode, 400);
    assert.equal(r.json().code, 'CONVERGE_ERR_BAD_REQUEST');
    assert.match(r.json().detail, /query\.status/);
  });

  test('a request without a token is 401 when tokens are configured', async () => {
    const r = await h.app.inject({ url: '/v1/nodes/n1' });
    assert.equal(r.statusCode, 401);
    assert.equal(r.json().code, 'CONVERGE_ERR_UNAUTHENTICATED');
    assert.equal(r.headers['www-authenticate'], 'Bearer', 'RFC 6750: a 401 names the scheme it wants');
  });

  test('a wrong token is 401, not 403', async () => {
    const r = await h.app.inject({ url: '/v1/nodes/n1', headers: { authorization: 'Bearer nope-nope-nope' } });
    assert.equal(r.statusCode, 401);
    assert.match(String(r.headers['www-authenticate']), /^Bearer error="invalid_token"/);
  });

  test('a read token on a write is 403 and sends nothing', async () => {
    const before = await h.store.headPosition();
    const r = await h.app.inject({
      method: 'POST',
      url: '/v1/nodes/n1/declarations',
      headers: read,
      payload: { resources: [{ id: 'x' }] },
    });
    assert.equal(r.statusCode, 403);
    assert.equal(r.json().code, 'CONVERGE_ERR_FORBIDDEN');
    assert.equal(await h.store.headPosition(), before);
  });

  test('an unknown route is a problem too', async () => {
    const r = await h.app.inject({ url: '/v1/nope', headers: read });
    assert.equal(r.statusCode, 404);
    assert.equal(r.json().code, 'CONVERGE_ERR_ROUTE_NOT_FOUND');
  });

  test('GET /v1/fleet counts nodes by status and liveness', async () => {
    const r = await h.app.inject({ url: '/v1/fleet', headers: read });
    assert.equal(r.statusCode, 200);
    const f = r.json();
    assert.equal(f.nodes, 3);
    assert.equal(f.byStatus.converged, 1);
    assert.equal(f.byStatus.behind, 1);
    assert.equal(f.byStatus.undeclared, 1);
    assert.equal(f.byLiveness['never-seen'], 1);
    assert.equal(f.ready, true);
  });
});

describe('GET /v1/nodes at fleet size: cursor pages and the spec filter', () => {
  let h: ApiHarness;
  before(async () => {
    h = await apiHarness();
    for (let i = 0; i < 25; i++) {
      const node = `p${String(i).padStart(2, '0')}`;
      await h.history.send(node, [{ id: i % 2 === 0 ? 'even' : 'odd' }]);
    }
    await h.settle();
  });
  after(() => h.close());

  test('pages walk every node once, in id order, and the last page says there is no next', async () => {
    const seen: string[] = [];
    let after: string | null = null;
    let pages = 0;
    do {
      const url: string = `/v1/nodes?limit=10${after === null ? '' : `&after=${after}`}`;
      const page = (await h.app.inject({ url, headers: read })).json();
      assert.equal(page.total, 25);
      assert.equal(page.count, page.nodes.length);
      seen.push(...page.nodes.map((n: { node: string }) => n.node));
      after = page.next;
      pages++;
    } while (after !== null && pages < 10);
    assert.equal(pages, 3);
    assert.deepEqual(seen, [...seen].sort());
    assert.equal(new Set(seen).size, 25);
  });

  test('spec= keeps the nodes whose latest send has that spec digest', async () => {
    const spec = h.runner.readModel.get('p00')?.sent?.specDigest ?? '';
    assert.notEqual(h.runner.readModel.get('p01')?.sent?.specDigest, spec);
    const page = (await h.app.inject({ url: `/v1/nodes?spec=${spec}`, headers: read })).json();
    assert.equal(page.total, 13);
    assert.ok(page.nodes.every((n: { sent: { specDigest: string } }) => n.sent.specDigest === spec));
  });

  test('a limit above 5,000 is a 400 problem, not a silent cap', async () => {
    const r = await h.app.inject({ url: '/v1/nodes?limit=5001', headers: read });
    assert.equal(r.statusCode, 400);
    assert.equal(r.json().code, 'CONVERGE_ERR_BAD_REQUEST');
  });
});
