import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { buildApp, parseApiTokens } from '../../src/api/index.ts';
import { createReadModel } from '../../src/readModel/readModel.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { apiHarness, read } from '../support/apiHarness.ts';
import type { ApiHarness as Harness } from '../support/apiHarness.ts';

// Responses said nothing about sniffing or caching, and a 414 was fastify's
// own JSON echoing the URL back. The header policy is per kind of route (docs/design.md §7: the
// dashboard's static assets will want caching of their own).

describe('response headers and framework errors', () => {
  let h: Harness;
  before(async () => {
    h = await apiHarness();
    await h.history.alive('n1');
    await h.settle();
  });
  after(() => h.close());

  const noStoreNoSniff = (r: { headers: Record<string, unknown> }, what: string): void => {
    assert.equal(r.headers['x-content-type-options'], 'nosniff', `${what}: nosniff`);
    assert.equal(r.headers['cache-control'], 'no-store', `${what}: no-store`);
  };

  test('API answers, problems and probes carry nosniff and no-store', async () => {
    noStoreNoSniff(await h.app.inject({ url: '/v1/nodes/n1', headers: read }), 'a node');
    noStoreNoSniff(await h.app.inject({ url: '/v1/nodes/ghost', headers: read }), 'a 404 problem');
    noStoreNoSniff(await h.app.inject({ url: '/v1/nodes/n1' }), 'a 401 problem');
    noStoreNoSniff(await h.app.inject({ url: '/v1/no-such-route' }), 'an unknown route');
    noStoreNoSniff(await h.app.inject({ url: '/healthz' }), '/healthz');
    noStoreNoSniff(await h.app.inject({ url: '/metrics' }), '/metrics');
    noStoreNoSniff(await h.app.inject({ url: '/v1/openapi.json' }), 'the OpenAPI document');
  });

  test('a path segment over the limit is a 414 problem that does not echo the URL', async () => {
    const long = 'x'.repeat(5_000);
    const r = await h.app.inject({ url: `/v1/nodes/${long}`, headers: read });
    assert.equal(r.statusCode, 414);
    assert.match(r.headers['content-type'] as string, /^application\/problem\+json/);
    assert.equal(r.json().code, 'CONVERGE_ERR_URI_TOO_LONG');
    assert.ok(!r.body.includes(long.slice(0, 300)), 'the URL is not echoed');
    noStoreNoSniff(r, 'a 414');
  });

  test('a node id as long as the schema allows is not a 414', async () => {
    const r = await h.app.inject({ url: `/v1/nodes/${'y'.repeat(255)}`, headers: read });
    assert.equal(r.statusCode, 404);
    assert.equal(r.json().code, 'CONVERGE_ERR_NODE_NOT_FOUND');
  });

  test('a URL that does not decode is a 400 problem that does not echo it', async () => {
    const r = await h.app.inject({ url: '/v1/nodes/%E0%A4%A/history', headers: read });
    assert.equal(r.statusCode, 400);
    assert.match(r.headers['content-type'] as string, /^application\/problem\+json/);
    assert.equal(r.json().code, 'CONVERGE_ERR_BAD_REQUEST');
    assert.ok(!r.body.includes('%E0%A4%A'), 'the URL is not echoed');
  });
});

test('a static route keeps nosniff and sets its own caching', async (t) => {
  const app = buildApp({
    readModel: createReadModel(),
    store: createMemoryEventStore(),
    logger: pino({ level: 'silent' }),
    tokens: parseApiTokens('').table,
  });
  t.after(() => app.close());
  app.get('/asset.js', { config: { kind: 'static' } }, async (_req, reply) => {
    reply.type('text/javascript').header('cache-control', 'public, max-age=3600');
    return 'export {};';
  });
  app.get('/plain', async () => ({ ok: true }));
  const asset = await app.inject({ url: '/asset.js' });
  assert.equal(asset.headers['x-content-type-options'], 'nosniff');
  assert.equal(asset.headers['cache-control'], 'public, max-age=3600');
  const plain = await app.inject({ url: '/plain' });
  assert.equal(plain.headers['cache-control'], 'no-store', 'a route that names no kind is treated as API');
});
