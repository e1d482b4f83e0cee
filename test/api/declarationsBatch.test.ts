import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createBatchSender } from '../../src/engine/sendBatch.ts';
import type { SendDeclarations } from '../../src/api/deps.ts';
import { streamOf } from '../../src/core/events/index.ts';
import { apiHarness, read, write } from '../support/apiHarness.ts';
import { testKey } from '../support/history.ts';

// POST /v1/declarations, many nodes in one store transaction, each answered.

async function harness() {
  let sendMany: SendDeclarations = async () => ({ outcomes: [] });
  const h = await apiHarness({ sendMany: (items) => sendMany(items) });
  let appends = 0;
  const append = h.store.append.bind(h.store);
  h.store.append = async (w) => {
    appends++;
    return append(w);
  };
  const sender = createBatchSender({ store: h.store, key: testKey, now: h.history.now });
  sendMany = (items) => sender.sendMany(items);
  return { h, appends: () => appends };
}

test('POST /v1/declarations records every node in one append and answers each, in order; a read right after sees them', async () => {
  const { h, appends } = await harness();
  try {
    await h.history.report('carrier', { carried: [443] });
    const before = appends();
    const r = await h.app.inject({
      method: 'POST',
      url: '/v1/declarations',
      headers: write,
      payload: [
        { node: 'a', resources: [{ id: 'web', ports: [443] }] },
        { node: 'carrier', resources: [{ id: 'web', ports: [443] }] },
        { node: 'b', resources: [{ id: 'web' }, { id: 'web' }] },
        { node: 'c', resources: [{ id: 'db' }] },
      ],
    });
    assert.equal(r.statusCode, 202, r.body);
    assert.equal(appends() - before, 1);
    const body = r.json() as { sent: number; refused: number; results: Record<string, unknown>[] };
    assert.equal(body.sent, 2);
    assert.equal(body.refused, 2);
    assert.deepEqual(
      body.results.map((x) => [x['node'], x['ok'], x['ok'] === true ? x['serial'] : x['code']]),
      [
        ['a', true, 1],
        ['carrier', false, 'CONVERGE_ERR_PORT_CARRIED'],
        ['b', false, 'CONVERGE_ERR_SPEC_DUPLICATE_ID'],
        ['c', true, 1],
      ],
    );
    const c = await h.app.inject({ method: 'GET', url: '/v1/nodes/c', headers: read });
    assert.equal(c.statusCode, 200);
    assert.equal((c.json() as { sent: { digest: string } }).sent.digest, body.results[3]?.['digest']);
    assert.equal((await h.store.readStream(streamOf('b'))).length, 0);
  } finally {
    await h.close();
  }
});

test('POST /v1/declarations needs the send scope, a list of 1 to 1,000 items, and well-formed items', async () => {
  const { h } = await harness();
  try {
    const post = (payload: unknown, headers = write) =>
      h.app.inject({ method: 'POST', url: '/v1/declarations', headers, payload: payload as object });
    assert.equal((await post([{ node: 'a', resources: [] }], read)).statusCode, 403);
    assert.equal((await post([])).statusCode, 400);
    assert.equal((await post({ node: 'a', resources: [] })).statusCode, 400);
    assert.equal((await post([{ node: 'a' }])).statusCode, 400);
    const many = Array.from({ length: 1_001 }, (_, i) => ({ node: `n${i}`, resources: [] }));
    const r = await post(many);
    assert.equal(r.statusCode, 400);
    assert.equal((r.json() as { code: string }).code, 'CONVERGE_ERR_BAD_REQUEST');
    assert.equal(await h.store.headPosition(), null);
  } finally {
    await h.close();
  }
});
