import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import { apiHarness, read } from '../support/apiHarness.ts';
import type { ApiHarness } from '../support/apiHarness.ts';

// The API the dashboard reads: a node's timeline with each race marked, the fleet as
// of a moment, and the node table's id search.

type Validate = ((data: unknown) => boolean) & { errors?: unknown };
const Ajv2020 = createRequire(import.meta.url)('ajv/dist/2020') as new (opts: object) => {
  addSchema: (s: object) => void;
  compile: (s: object) => Validate;
};

/** The seed's race on node r1: A sent, B sent, A's report lands after B's send, then B's report. */
async function race(h: ApiHarness) {
  const a = await h.history.send('r1');
  h.history.tick(1000);
  const b = await h.history.send('r1');
  h.history.tick(1000);
  const stale = await h.history.report('r1', { declared: a.digest, applied: ['web'] });
  const between = h.history.tick(1000).toISOString();
  h.history.tick(1000);
  const matching = await h.history.report('r1', { declared: b.digest, applied: ['web'] });
  await h.settle();
  return { a, b, stale, matching, between };
}

test("a node's timeline is newest first, classifies each report, marks the race and says what became of each declaration", async (t) => {
  const h = await apiHarness();
  t.after(() => h.close());
  const r = await race(h);
  const res = await h.app.inject({ url: '/v1/nodes/r1/timeline', headers: read });
  assert.equal(res.statusCode, 200);
  const tl = res.json();
  assert.equal(tl.events, 4);
  assert.deepEqual(
    tl.entries.map((e: { type: string; class: string | null; status: string }) => [e.type, e.class, e.status]),
    [
      ['ReportReceived', 'matching', 'converged'],
      ['ReportReceived', 'stale', 'behind'],
      ['DeclarationSent', null, 'behind'],
      ['DeclarationSent', null, 'behind'],
    ],
  );
  const [matching, stale, sentB, sentA] = tl.entries;
  assert.equal(stale.position, r.stale.toString());
  assert.deepEqual(stale.race, { sentSerial: 2, sentDigest: r.b.digest, sentAt: sentB.at });
  assert.equal(stale.serial, 1);
  assert.equal(matching.race, null);
  assert.equal(sentA.declaration.outcome, 'superseded');
  assert.equal(sentB.declaration.outcome, 'acknowledged');
  assert.equal(sentB.declaration.latencyMs, 3000);
});

test('the timeline pages back with next, and a silence longer than the grace period is marked on the sign of life that ends it', async (t) => {
  const h = await apiHarness();
  t.after(() => h.close());
  await h.history.alive('s1');
  h.history.tick(5 * 60_000);
  await h.history.alive('s1');
  for (let i = 0; i < 3; i++) {
    h.history.tick(1000);
    await h.history.alive('s1');
  }
  await h.settle();
  const p1 = (await h.app.inject({ url: '/v1/nodes/s1/timeline?limit=3', headers: read })).json();
  assert.equal(p1.entries.length, 3);
  assert.notEqual(p1.next, null);
  const p2 = (await h.app.inject({ url: `/v1/nodes/s1/timeline?limit=3&before=${p1.next}`, headers: read })).json();
  assert.equal(p2.entries.length, 2);
  assert.equal(p2.next, null);
  assert.deepEqual(
    p2.entries.map((e: { silentForMs: number | null }) => e.silentForMs),
    [5 * 60_000, null],
  );
  assert.equal((await h.app.inject({ url: '/v1/nodes/ghost/timeline', headers: read })).statusCode, 404);
});

test('the fleet as of a moment between the stale report and the matching one counts the node behind, with one stale report', async (t) => {
  const h = await apiHarness();
  t.after(() => h.close());
  const r = await race(h);
  const get = async (at: string) => (await h.app.inject({ url: `/v1/fleet?at=${encodeURIComponent(at)}`, headers: read })).json();
  const between = await get(r.between);
  assert.equal(between.at, r.between);
  assert.equal(between.moment, r.between);
  assert.equal(between.byStatus.behind, 1);
  assert.equal(between.byStatus.converged, 0);
  assert.equal(between.anomalies.stale, 1);
  const atStale = await get(r.stale.toString());
  assert.equal(atStale.position, r.stale.toString());
  assert.equal(atStale.byStatus.behind, 1);
  const atEnd = await get(r.matching.toString());
  assert.equal(atEnd.byStatus.converged, 1);
  assert.equal(atEnd.convergence.p50Ms, 3000);
  const now = (await h.app.inject({ url: '/v1/fleet', headers: read })).json();
  assert.equal(now.byStatus.converged, 1);
  assert.equal(now.at, undefined);
  const bad = await h.app.inject({ url: '/v1/fleet?at=yesterday', headers: read });
  assert.equal(bad.statusCode, 400);
  assert.equal(bad.json().code, 'CONVERGE_ERR_BAD_REQUEST');
});

test('the OpenAPI document describes `at` on /v1/fleet, the timeline route and the id prefix, and their answers validate', async (t) => {
  const h = await apiHarness();
  t.after(() => h.close());
  const r = await race(h);
  const doc = (await h.app.inject({ url: '/v1/openapi.json' })).json();
  const fleetParams = doc.paths['/v1/fleet'].get.parameters as { name: string; in: string; description?: string }[];
  const at = fleetParams.find((p) => p.name === 'at');
  assert.equal(at?.in, 'query');
  assert.match(at?.description ?? '', /ISO 8601 time or a decimal store position/);
  assert.ok(doc.paths['/v1/nodes/{node}/timeline'].get);
  assert.ok((doc.paths['/v1/nodes'].get.parameters as { name: string }[]).some((p) => p.name === 'prefix'));
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  ajv.addSchema({ $id: 'openapi.json', components: doc.components });
  const check = (schema: string, value: unknown): void => {
    const v = ajv.compile({ $ref: `openapi.json#/components/schemas/${schema}` });
    assert.ok(v(value), `${schema}: ${JSON.stringify(v.errors)}`);
  };
  check('Timeline', (await h.app.inject({ url: '/v1/nodes/r1/timeline', headers: read })).json());
  check('Fleet', (await h.app.inject({ url: `/v1/fleet?at=${r.between}`, headers: read })).json());
  check('Fleet', (await h.app.inject({ url: '/v1/fleet', headers: read })).json());
});

test('GET /v1/nodes?prefix= lists only the nodes whose id starts with it, still paged', async (t) => {
  const h = await apiHarness();
  t.after(() => h.close());
  for (const n of ['web-1', 'web-2', 'web-3', 'db-1', 'webby']) await h.history.alive(n);
  await h.settle();
  const page = (await h.app.inject({ url: '/v1/nodes?prefix=web-&limit=2', headers: read })).json();
  assert.deepEqual(
    page.nodes.map((n: { node: string }) => n.node),
    ['web-1', 'web-2'],
  );
  assert.equal(page.total, 3);
  const rest = (await h.app.inject({ url: `/v1/nodes?prefix=web-&limit=2&after=${page.next}`, headers: read })).json();
  assert.deepEqual(
    rest.nodes.map((n: { node: string }) => n.node),
    ['web-3'],
  );
});
