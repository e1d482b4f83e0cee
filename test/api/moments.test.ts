import assert from 'node:assert/strict';
import { test } from 'node:test';
import { streamOf } from '../../src/core/events/index.ts';
import type { DeclarationSent, Recorded } from '../../src/core/events/index.ts';
import { apiHarness, read, write } from '../support/apiHarness.ts';

// A moment in the API (?at=, ?from=&to=, a send's asOf) is read as the CLI reads one
// (projections/node/forensics.ts readAt): a time needs its zone, a date must exist, a position fits
// 64 bits, a window runs forwards, and a send as of a moment is refused where a rollout's would be.

const get = (url: string) => ({ url, headers: read });
const post = (url: string, body: unknown) => ({
  method: 'POST' as const,
  url,
  headers: { ...write, 'content-type': 'application/json' },
  payload: JSON.stringify(body),
});

test('?at= refuses a time without a zone, a date that does not exist, a position past 64 bits and non-ISO text', async (t) => {
  const h = await apiHarness();
  t.after(() => h.close());
  await h.history.send('n1');
  await h.settle();
  for (const [at, why] of [
    ['2026-11-29T14:00:00', /has no zone: add Z for UTC or an offset/],
    ['2026-02-30', /not a date and time that exist/],
    ['99999999999999999999', /past the largest store position/],
    ['2026-11-29 10:00 PM', /neither an ISO 8601 time nor a decimal position/],
  ] as const) {
    for (const url of [`/v1/nodes/n1/state?at=${encodeURIComponent(at)}`, `/v1/fleet?at=${encodeURIComponent(at)}`]) {
      const r = await h.app.inject(get(url));
      assert.equal(r.statusCode, 400, `${url}: ${r.body}`);
      assert.match(r.json().detail, why, url);
    }
  }
  const ok = await h.app.inject(get(`/v1/nodes/n1/state?at=${encodeURIComponent('2026-11-29T15:00:00+01:00')}`));
  assert.equal(ok.statusCode, 200, ok.body);
});

test('evidence ?from= after ?to= is 400 naming both ends', async (t) => {
  const h = await apiHarness();
  t.after(() => h.close());
  await h.history.send('n1');
  await h.settle();
  for (const [from, to] of [
    ['2026-11-30T00:00:00Z', '2026-11-29T00:00:00Z'],
    ['5', '1'],
  ] as const) {
    const r = await h.app.inject(get(`/v1/nodes/n1/evidence?from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}&unsigned=true`));
    assert.equal(r.statusCode, 400, r.body);
    assert.match(r.json().detail, new RegExp(`query.from "${from}" is after query.to "${to}"`));
  }
});

test('a send asOf reads all digits as a position and refuses a time to come or a position past the head, sending nothing', async (t) => {
  const h = await apiHarness();
  t.after(() => h.close());
  const first = await h.history.send('n1', [{ id: 'web', image: 'nginx:1.26' }]);
  h.history.tick(60_000);
  await h.history.send('n1', [{ id: 'web', image: 'nginx:1.27' }]);
  await h.settle();
  const sends = async () =>
    (await h.store.readStream(streamOf('n1'))).filter((e) => e.type === 'DeclarationSent') as Recorded<DeclarationSent>[];
  const [one] = await sends();

  const byPosition = await h.app.inject(post('/v1/nodes/n1/declarations', { asOf: one!.position.toString() }));
  assert.equal(byPosition.statusCode, 202, byPosition.body);
  assert.equal((await sends()).at(-1)!.data.specDigest, one!.data.specDigest, 'the spec of the send at that position');
  assert.equal(one!.data.digest, first.digest);

  const before = (await sends()).length;
  const head = (await h.store.headPosition())!;
  for (const [asOf, why] of [
    [(head + 1000n).toString(), /past the store's head/],
    [new Date(h.history.now().getTime() + 3_600_000).toISOString(), /a time to come/],
    ['2026-11-29T14:00:00', /has no zone/],
  ] as const) {
    const r = await h.app.inject(post('/v1/nodes/n1/declarations', { asOf }));
    assert.equal(r.statusCode, 400, `${asOf}: ${r.body}`);
    assert.match(r.json().detail, why);
  }
  assert.equal((await sends()).length, before, 'nothing was sent');
});
