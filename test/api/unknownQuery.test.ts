import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { apiHarness, read, write } from '../support/apiHarness.ts';
import type { ApiHarness } from '../support/apiHarness.ts';

// A query parameter no route knows used to be ignored: `/v1/nodes?caughtUp=true` answered every
// node, as if filtered. Every route with a query schema refuses what it does not know instead.

describe('unknown query parameters', () => {
  let h: ApiHarness;
  before(async () => {
    h = await apiHarness();
    await h.history.send('n1');
    await h.settle();
  });
  after(() => h.close());

  const urls = [
    '/v1/nodes?caughtUp=true',
    '/v1/nodes/n1/history?caughtUp=true',
    '/v1/nodes/n1/state?at=1&caughtUp=true',
    '/v1/nodes/n1/await?timeoutMs=0&caughtUp=true',
    '/v1/nodes/n1/timeline?caughtUp=true',
    '/v1/fleet?caughtUp=true',
    '/v1/rollouts?caughtUp=true',
    '/v1/rollouts/r1/nodes?caughtUp=true',
    '/v1/events?caughtUp=true',
  ];
  for (const url of urls) {
    test(`${url.split('?')[0]} refuses an unknown parameter with a 400 naming it`, async () => {
      const r = await h.app.inject({ url, headers: read });
      assert.equal(r.statusCode, 400, r.body);
      assert.match(String(r.headers['content-type']), /^application\/problem\+json/);
      assert.equal(r.json().code, 'CONVERGE_ERR_BAD_REQUEST');
      assert.match(r.json().detail, /caughtUp/);
    });
  }

  test('known parameters are still accepted', async () => {
    const r = await h.app.inject({ url: '/v1/nodes?status=behind&limit=10', headers: read });
    assert.equal(r.statusCode, 200, r.body);
  });
});

describe('unknown fields in a declaration body', () => {
  let h: ApiHarness;
  before(async () => {
    h = await apiHarness();
  });
  after(() => h.close());

  test('POST /v1/nodes/:node/declarations refuses an unknown top-level field with a 400 naming it', async () => {
    const r = await h.app.inject({
      method: 'POST',
      url: '/v1/nodes/n1/declarations',
      headers: write,
      payload: { resources: [{ id: 'web' }], resourcez: [{ id: 'db' }] },
    });
    assert.equal(r.statusCode, 400, r.body);
    assert.match(r.json().detail, /resourcez/);
    assert.equal(await h.store.headPosition(), null, 'nothing was recorded');
  });

  test('POST /v1/declarations refuses an unknown field of an item', async () => {
    const r = await h.app.inject({
      method: 'POST',
      url: '/v1/declarations',
      headers: write,
      payload: [{ node: 'n1', resources: [], extra: 1 }],
    });
    assert.equal(r.statusCode, 400, r.body);
    assert.match(r.json().detail, /extra/);
  });
});
