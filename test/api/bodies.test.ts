import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { defaultMaxEventBytes } from '../../src/store/index.ts';
import { apiHarness, read, write } from '../support/apiHarness.ts';
import type { ApiHarness as Harness } from '../support/apiHarness.ts';
import { partialUpload } from '../support/rawHttp.ts';

// Eight clients without a valid token sending 4 MiB bodies slowed everyone
// else, because bodies were read and parsed before the token was checked. Each case below
// announces a large body, sends only its first 64 KiB and never the rest: a server that waits
// for the body before deciding never answers (the test then fails on its timeout).

const mib4 = 4 * 1024 * 1024;
const prefix = 64 * 1024;

describe('what the server reads of a request body, over a real socket', () => {
  let h: Harness;
  let base: string;
  before(async () => {
    h = await apiHarness();
    base = await h.app.listen({ port: 0, host: '127.0.0.1' });
  });
  after(() => h.close());

  test(
    'a POST without a token is answered 401 before its body is uploaded, and the connection is closed',
    { timeout: 20_000 },
    async () => {
      const r = await partialUpload(base, {
        method: 'POST',
        path: '/v1/nodes/n1/declarations',
        headers: { 'content-type': 'application/json' },
        declaredBytes: mib4,
        sendBytes: prefix,
      });
      assert.equal(r.status, 401);
      assert.match(r.headers.get('content-type') ?? '', /^application\/problem\+json/);
      assert.equal(JSON.parse(r.body).code, 'CONVERGE_ERR_UNAUTHENTICATED');
      assert.equal(r.headers.get('connection'), 'close', 'the rest of the upload is not waited for on a kept-alive socket');
      assert.ok(r.closedByServer);
    },
  );

  test('a POST with a wrong token is answered 401 the same way', { timeout: 20_000 }, async () => {
    const r = await partialUpload(base, {
      method: 'POST',
      path: '/v1/nodes/n1/declarations',
      headers: { 'content-type': 'application/json', authorization: 'Bearer not-a-valid-token' },
      declaredBytes: mib4,
      sendBytes: prefix,
    });
    assert.equal(r.status, 401);
    assert.ok(r.closedByServer);
  });

  test('a read token POSTing a large body is answered 403 before the body is uploaded', { timeout: 20_000 }, async () => {
    const r = await partialUpload(base, {
      method: 'POST',
      path: '/v1/nodes/n1/declarations',
      headers: { 'content-type': 'application/json', ...read },
      declaredBytes: mib4,
      sendBytes: prefix,
    });
    assert.equal(r.status, 403);
    assert.ok(r.closedByServer);
  });

  test("a declaration larger than the store's event limit is refused 413 before its body is uploaded", { timeout: 20_000 }, async () => {
    const r = await partialUpload(base, {
      method: 'POST',
      path: '/v1/nodes/n1/declarations',
      headers: { 'content-type': 'application/json', ...write },
      declaredBytes: defaultMaxEventBytes + 1,
      sendBytes: prefix,
    });
    assert.equal(r.status, 413);
    const problem = JSON.parse(r.body);
    assert.equal(problem.code, 'CONVERGE_ERR_BODY_TOO_LARGE');
    assert.equal(problem.details.limit, defaultMaxEventBytes);
    assert.ok(r.closedByServer);
  });

  test('a GET that announces a body is refused 413 without reading it', { timeout: 20_000 }, async () => {
    const r = await partialUpload(base, { method: 'GET', path: '/v1/fleet', headers: read, declaredBytes: mib4, sendBytes: prefix });
    assert.equal(r.status, 413);
    assert.equal(JSON.parse(r.body).code, 'CONVERGE_ERR_BODY_TOO_LARGE');
    assert.ok(r.closedByServer);
  });
});

describe('request bodies the API refuses, with problem+json', () => {
  let h: Harness;
  before(async () => {
    h = await apiHarness();
  });
  after(() => h.close());

  test('a POST without content-type is 415, not 400', async () => {
    const r = await h.app.inject({ method: 'POST', url: '/v1/nodes/b1/declarations', headers: write, payload: '{"resources":[]}' });
    assert.equal(r.statusCode, 415);
    assert.match(r.headers['content-type'] as string, /^application\/problem\+json/);
    assert.equal(r.json().code, 'CONVERGE_ERR_UNSUPPORTED_MEDIA_TYPE');
  });

  test('a POST without content-type and without a body is 415 too', async () => {
    const r = await h.app.inject({ method: 'POST', url: '/v1/nodes/b1/declarations', headers: write });
    assert.equal(r.statusCode, 415);
    assert.equal(r.json().code, 'CONVERGE_ERR_UNSUPPORTED_MEDIA_TYPE');
  });

  test('a POST of text/plain is 415', async () => {
    const r = await h.app.inject({
      method: 'POST',
      url: '/v1/nodes/b1/declarations',
      headers: { ...write, 'content-type': 'text/plain' },
      payload: '{"resources":[]}',
    });
    assert.equal(r.statusCode, 415);
    assert.equal(r.json().code, 'CONVERGE_ERR_UNSUPPORTED_MEDIA_TYPE');
  });

  test('application/json with a charset is accepted', async () => {
    const r = await h.app.inject({
      method: 'POST',
      url: '/v1/nodes/b1/declarations',
      headers: { ...write, 'content-type': 'application/json; charset=utf-8' },
      payload: '{"resources":[{"id":"web"}]}',
    });
    assert.equal(r.statusCode, 202);
  });

  test('deeply nested JSON is 400 CONVERGE_ERR_BAD_REQUEST, not 500', async () => {
    for (const depth of [200, 100_000]) {
      const r = await h.app.inject({
        method: 'POST',
        url: '/v1/nodes/b2/declarations',
        headers: { ...write, 'content-type': 'application/json' },
        payload: `{"resources":[{"id":"a","x":${'['.repeat(depth)}${']'.repeat(depth)}}]}`,
      });
      assert.equal(r.statusCode, 400, `depth ${depth}`);
      assert.equal(r.json().code, 'CONVERGE_ERR_BAD_REQUEST');
      assert.match(r.json().detail, /nests deeper than \d+ levels/);
    }
    assert.equal(h.runner.readModel.get('b2'), undefined, 'nothing was sent');
  });

  test('nesting within the limit is still a valid declaration', async () => {
    const r = await h.app.inject({
      method: 'POST',
      url: '/v1/nodes/b3/declarations',
      headers: { ...write, 'content-type': 'application/json' },
      payload: `{"resources":[{"id":"a","x":${'['.repeat(20)}${']'.repeat(20)}}]}`,
    });
    assert.equal(r.statusCode, 202);
  });
});
