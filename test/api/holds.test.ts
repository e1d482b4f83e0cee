import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { holdsStream } from '../../src/core/events/index.ts';
import { createSender } from '../../src/engine/send.ts';
import { createBatchSender } from '../../src/engine/sendBatch.ts';
import type { EventStore } from '../../src/store/index.ts';
import { apiHarness, read, write } from '../support/apiHarness.ts';
import type { ApiHarness } from '../support/apiHarness.ts';
import { testKey } from '../support/history.ts';

// docs/design.md §8 "Holds and pins" through the API: each command an event in the `holds`
// stream, the node views show both, and a direct send to a pinned node is 409 unless forced.

describe('holding and pinning a node', () => {
  let h: ApiHarness;
  before(async () => {
    // The harness's store is made inside it: the real senders are built on it once it exists.
    const box: { store?: EventStore } = {};
    h = await apiHarness({
      send: async (node, resources, opts) => createSender({ store: box.store!, key: testKey }).send(node, resources, opts),
      sendMany: async (items) => createBatchSender({ store: box.store!, key: testKey }).sendMany(items),
    });
    box.store = h.store;
    await h.history.send('n1');
    await h.history.send('n2');
    await h.history.send('n3');
    await h.settle();
  });
  after(() => h.close());

  const get = async (url: string) => (await h.app.inject({ url, headers: read })).json();
  const post = (url: string, payload: object = {}) => h.app.inject({ method: 'POST', url, headers: write, payload });

  test('a hold shows on the node and in the listing, a second hold is 409, and a release clears it', async () => {
    const r = await post('/v1/nodes/n1/hold', { reason: 'disk swap' });
    assert.equal(r.statusCode, 200, r.body);
    assert.equal(r.json().held.reason, 'disk swap');
    assert.match(r.json().held.by, /^api token /);
    assert.equal(r.json().pinned, null);

    const node = await get('/v1/nodes/n1');
    assert.deepEqual(node.held, r.json().held);
    assert.equal(node.pinned, null);
    const listed = (await get('/v1/nodes')).nodes.find((n: { node: string }) => n.node === 'n1');
    assert.equal(listed.held.reason, 'disk swap');

    const again = await post('/v1/nodes/n1/hold');
    assert.equal(again.statusCode, 409);
    assert.equal(again.json().code, 'CONVERGE_ERR_HOLD_STATE');

    const released = await post('/v1/nodes/n1/release');
    assert.equal(released.statusCode, 200, released.body);
    assert.equal(released.json().held, null);
    assert.equal((await get('/v1/nodes/n1')).held, null);
    assert.equal((await post('/v1/nodes/n1/release')).json().code, 'CONVERGE_ERR_HOLD_STATE');

    // The history keeps every command, in order, in the holds stream.
    const events = await h.store.readStream(holdsStream);
    assert.deepEqual(
      events.map((e) => [e.type, (e.data as { node: string }).node]),
      [
        ['NodeHeld', 'n1'],
        ['NodeReleased', 'n1'],
      ],
    );
  });

  test('a pinned node refuses a direct send with 409 unless forced; unpinned, it takes sends again', async () => {
    const pin = await post('/v1/nodes/n2/pin', { reason: 'customer freeze' });
    assert.equal(pin.statusCode, 200, pin.body);
    assert.equal((await get('/v1/nodes/n2')).pinned.reason, 'customer freeze');

    const refused = await post('/v1/nodes/n2/declarations', { resources: [{ id: 'web', image: 'nginx:2' }] });
    assert.equal(refused.statusCode, 409, refused.body);
    assert.equal(refused.json().code, 'CONVERGE_ERR_NODE_PINNED');
    const serial = (await get('/v1/nodes/n2')).sent.serial;

    const forced = await post('/v1/nodes/n2/declarations', { resources: [{ id: 'web', image: 'nginx:2' }], force: true });
    assert.equal(forced.statusCode, 202, forced.body);
    assert.equal(forced.json().serial, serial + 1);

    // The bulk route answers per item: the pinned one refused with its code, a forced one sent.
    const batch = await post('/v1/declarations', [
      { node: 'n2', resources: [{ id: 'web' }] },
      { node: 'n3', resources: [{ id: 'web' }] },
    ]);
    assert.equal(batch.statusCode, 202, batch.body);
    assert.deepEqual(
      batch.json().results.map((x: { node: string; ok: boolean; code?: string }) => [x.node, x.ok, x.code ?? null]),
      [
        ['n2', false, 'CONVERGE_ERR_NODE_PINNED'],
        ['n3', true, null],
      ],
    );
    const forcedBatch = await post('/v1/declarations', [{ node: 'n2', resources: [{ id: 'web' }], force: true }]);
    assert.equal(forcedBatch.json().sent, 1, forcedBatch.body);

    assert.equal((await post('/v1/nodes/n2/unpin')).statusCode, 200);
    const sent = await post('/v1/nodes/n2/declarations', { resources: [{ id: 'web', image: 'nginx:3' }] });
    assert.equal(sent.statusCode, 202, sent.body);
  });

  test('a node no event names cannot be held, and a verb that is none is refused', async () => {
    const r = await post('/v1/nodes/ghost/hold');
    assert.equal(r.statusCode, 404);
    assert.equal(r.json().code, 'CONVERGE_ERR_NODE_NOT_FOUND');
    assert.equal((await post('/v1/nodes/n1/freeze')).statusCode, 400);
  });
});
