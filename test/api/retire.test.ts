import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { verifyReadModel } from '../../src/readModel/replay.ts';
import { apiHarness, read, write } from '../support/apiHarness.ts';
import type { ApiHarness } from '../support/apiHarness.ts';

// docs/design.md §3 "Retired nodes": a retired node leaves the fleet's views and counts, its
// history stays, and a send brings it back.

const names = (body: { nodes: { node: string }[] }): string[] => body.nodes.map((n) => n.node);

describe('retiring a node', () => {
  let h: ApiHarness;
  let beforeRetirement: string;
  before(async () => {
    h = await apiHarness();
    const a = await h.history.send('n1');
    h.history.tick();
    await h.history.report('n1', { declared: a.digest, applied: ['web'] });
    await h.history.send('n2');
    await h.history.alive('old');
    h.history.tick(60_000);
    beforeRetirement = h.history.now().toISOString();
    h.history.tick(60_000);
    await h.settle();
  });
  after(() => h.close());

  const get = async (url: string) => (await h.app.inject({ url, headers: read })).json();
  const retire = (node: string, payload: object = {}) =>
    h.app.inject({ method: 'POST', url: `/v1/nodes/${node}/retire`, headers: write, payload });

  test('a retired node leaves the fleet counts and the listing, and its history and state as of before still answer', async () => {
    const fleetBefore = await get('/v1/fleet');
    assert.equal(fleetBefore.nodes, 3);
    assert.deepEqual(names(await get('/v1/nodes')), ['n1', 'n2', 'old']);

    const r = await retire('old', { reason: 'decommissioned' });
    assert.equal(r.statusCode, 200, r.body);
    assert.equal(r.json().node, 'old');
    assert.equal(r.json().retiredAt, h.history.now().toISOString());

    const fleet = await get('/v1/fleet');
    assert.equal(fleet.nodes, 2);
    assert.equal(fleet.byLiveness['never-seen'] + fleet.byLiveness.connected + fleet.byLiveness.disconnected, 2);
    assert.equal(fleet.byStatus.undeclared, fleetBefore.byStatus.undeclared - 1);
    const listing = await get('/v1/nodes');
    assert.deepEqual(names(listing), ['n1', 'n2']);
    assert.equal(listing.total, 2);
    assert.deepEqual(names(await get('/v1/nodes?status=undeclared')), []);

    // Its own record answers: the node itself, its history, its state before the retirement.
    const node = await get('/v1/nodes/old');
    assert.equal(node.retiredAt, r.json().retiredAt);
    const history = await get('/v1/nodes/old/history');
    assert.deepEqual(
      history.events.map((e: { type: string }) => e.type),
      ['NodeRetired', 'AliveSeen'],
    );
    const then = await get(`/v1/nodes/old/state?at=${encodeURIComponent(beforeRetirement)}`);
    assert.equal(then.state.retiredAt, null);
    assert.equal(then.folded, 1);
    const timeline = await h.app.inject({ url: '/v1/nodes/old/timeline', headers: read });
    assert.equal(timeline.statusCode, 200, timeline.body);
    assert.match(timeline.body, /"NodeRetired"/);

    // The gauges count the fleet too.
    const metrics = (await h.app.inject({ url: '/metrics', headers: read })).body;
    const total = [...metrics.matchAll(/^converge_nodes\{[^}]*\} (\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
    assert.equal(total, 2, 'converge_nodes sums to the fleet without the retired node');

    // A replay from zero folds the retirement as the live model did.
    assert.deepEqual(await verifyReadModel(h.store, h.runner.readModel), []);
  });

  test('retiring a retired node is a 409, and a node never heard of a 404', async () => {
    const again = await retire('old');
    assert.equal(again.statusCode, 409);
    assert.equal(again.json().code, 'CONVERGE_ERR_NODE_RETIRED');
    const ghost = await retire('ghost');
    assert.equal(ghost.statusCode, 404);
    assert.equal(ghost.json().code, 'CONVERGE_ERR_NODE_NOT_FOUND');
  });

  test('retiring takes the send scope', async () => {
    const r = await h.app.inject({ method: 'POST', url: '/v1/nodes/n2/retire', headers: read, payload: {} });
    assert.equal(r.statusCode, 403);
  });

  test('a send to a retired node brings it back into the fleet', async () => {
    const r = await h.app.inject({
      method: 'POST',
      url: '/v1/nodes/old/declarations',
      headers: write,
      payload: { resources: [{ id: 'web' }] },
    });
    assert.equal(r.statusCode, 202, r.body);
    await h.settle();
    assert.deepEqual(names(await get('/v1/nodes')), ['n1', 'n2', 'old']);
    assert.equal((await get('/v1/fleet')).nodes, 3);
    assert.equal((await get('/v1/nodes/old')).retiredAt, null);
    assert.deepEqual(await verifyReadModel(h.store, h.runner.readModel), []);
  });
});
