import assert from 'node:assert/strict';
import { test } from 'node:test';
import { apiHarness, write } from '../support/apiHarness.ts';
import { streamOf } from '../../src/core/events/index.ts';
import type { DeclarationSent, Recorded } from '../../src/core/events/index.ts';

// POST /v1/nodes/:node/declarations {"asOf": …}: the spec the node had been sent then, sent again.

const post = (url: string, body: unknown) => ({
  method: 'POST' as const,
  url,
  headers: { ...write, 'content-type': 'application/json' },
  payload: JSON.stringify(body),
});

test('asOf sends again the exact spec of the latest send at or before that time; nothing then is 404; both or neither is 400', async (t) => {
  const h = await apiHarness();
  t.after(() => h.close());
  const first = await h.history.send('n1', [{ id: 'web', image: 'nginx:1.26', env: { Z: '1', A: '2' } }]);
  const asOf = h.history.now().toISOString();
  h.history.tick(60_000);
  await h.history.send('n1', [{ id: 'web', image: 'broken' }]);
  await h.settle();

  const r = await h.app.inject(post('/v1/nodes/n1/declarations', { asOf }));
  assert.equal(r.statusCode, 202, r.body);
  assert.equal(r.json().serial, 3);
  const last = (await h.store.readStream(streamOf('n1'))).at(-1) as Recorded<DeclarationSent>;
  const original = (await h.store.readStream(streamOf('n1'))).find(
    (e) => e.type === 'DeclarationSent' && (e as Recorded<DeclarationSent>).data.digest === first.digest,
  ) as Recorded<DeclarationSent>;
  assert.equal(last.data.specDigest, original.data.specDigest, 'the spec of serial 1, byte-equal by spec digest');

  const early = await h.app.inject(post('/v1/nodes/n1/declarations', { asOf: '2000-01-01T00:00:00Z' }));
  assert.equal(early.statusCode, 404);
  assert.match(early.json().detail, /had been sent no declaration at or before 2000-01-01T00:00:00.000Z/);
  assert.equal((await h.app.inject(post('/v1/nodes/n1/declarations', { asOf, resources: [] }))).statusCode, 400);
  assert.equal((await h.app.inject(post('/v1/nodes/n1/declarations', {}))).statusCode, 400);
  assert.equal((await h.app.inject(post('/v1/nodes/n1/declarations', { asOf: 'yesterday' }))).statusCode, 400);
});
