import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createRequire } from 'node:module';
import { Validator } from '@seriousme/openapi-schema-validator';
import { apiHarness } from '../support/apiHarness.ts';

// ajv ships with fastify; its 2020 build compiles the JSON Schema dialect OpenAPI 3.1 uses.
type Validate = ((data: unknown) => boolean) & { errors?: unknown };
type Ajv = { addSchema: (s: object) => void; compile: (s: object) => Validate };
const Ajv2020 = createRequire(import.meta.url)('ajv/dist/2020') as new (opts: object) => Ajv;

const designRoutes = [
  ['get', '/v1/nodes'],
  ['get', '/v1/nodes/{node}'],
  ['get', '/v1/nodes/{node}/history'],
  ['get', '/v1/nodes/{node}/state'],
  ['get', '/v1/nodes/{node}/await'],
  ['post', '/v1/nodes/{node}/declarations'],
  ['get', '/v1/fleet'],
  ['get', '/v1/events'],
  ['get', '/metrics'],
  ['get', '/healthz'],
  ['get', '/readyz'],
] as const;

function refsIn(value: unknown, out: string[] = []): string[] {
  if (Array.isArray(value)) for (const v of value) refsIn(v, out);
  else if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (k === '$ref' && typeof v === 'string') out.push(v);
      else refsIn(v, out);
    }
  }
  return out;
}

function resolvePointer(doc: unknown, ref: string): unknown {
  assert.ok(ref.startsWith('#/'), `${ref} is a local reference`);
  let at: unknown = doc;
  for (const part of ref.slice(2).split('/')) {
    at = (at as Record<string, unknown> | undefined)?.[part.replace(/~1/g, '/').replace(/~0/g, '~')];
  }
  return at;
}

test('the OpenAPI document is 3.x, lists every docs/design.md §7 route, resolves every $ref and its schemas compile', async (t) => {
  const h = await apiHarness();
  t.after(() => h.close());
  const r = await h.app.inject({ url: '/v1/openapi.json' });
  assert.equal(r.statusCode, 200);
  const doc = r.json();
  assert.match(doc.openapi, /^3\.\d+\.\d+$/);
  for (const [method, path] of designRoutes) assert.ok(doc.paths[path]?.[method], `${method.toUpperCase()} ${path} is documented`);

  const refs = refsIn(doc);
  assert.ok(refs.length > 10);
  for (const ref of refs) assert.notEqual(resolvePointer(doc, ref), undefined, `${ref} resolves`);

  const ajv = new Ajv2020({ strict: false, allErrors: true });
  ajv.addSchema({ $id: 'openapi.json', components: doc.components });
  for (const name of Object.keys(doc.components.schemas)) {
    assert.doesNotThrow(() => ajv.compile({ $ref: `openapi.json#/components/schemas/${name}` }), `components.schemas.${name} compiles`);
  }
  for (const [path, ops] of Object.entries<Record<string, { parameters?: { schema: object }[] }>>(doc.paths)) {
    for (const op of Object.values(ops))
      for (const p of op.parameters ?? []) assert.doesNotThrow(() => ajv.compile(p.schema), `a parameter of ${path} compiles`);
  }

  // The document describes what the API really answers: a node view validates against NodeState.
  const a = await h.history.send('o1');
  await h.history.report('o1', { declared: a.digest, applied: ['web'] });
  await h.settle();
  const validate = ajv.compile({ $ref: 'openapi.json#/components/schemas/NodeState' });
  const node = (await h.app.inject({ url: '/v1/nodes/o1', headers: { authorization: 'Bearer reader-token-1' } })).json();
  assert.ok(validate(node), JSON.stringify(validate.errors));
  const fleet = (await h.app.inject({ url: '/v1/fleet', headers: { authorization: 'Bearer reader-token-1' } })).json();
  const vf = ajv.compile({ $ref: 'openapi.json#/components/schemas/Fleet' });
  assert.ok(vf(fleet), JSON.stringify(vf.errors));
  const problem = (await h.app.inject({ url: '/v1/nodes/nope', headers: { authorization: 'Bearer reader-token-1' } })).json();
  const vp = ajv.compile({ $ref: 'openapi.json#/components/schemas/Problem' });
  assert.ok(vp(problem), JSON.stringify(vp.errors));
});

type Operation = {
  security?: Record<string, string[]>[];
  'x-converge-scope'?: string;
  parameters?: { in: string; name: string; required?: boolean }[];
  responses: Record<string, { content?: Record<string, unknown> }>;
  requestBody?: { content: Record<string, unknown> };
};

test('the OpenAPI document validates against the OpenAPI 3.1 schema', async (t) => {
  const h = await apiHarness();
  t.after(() => h.close());
  const doc = (await h.app.inject({ url: '/v1/openapi.json' })).json();
  assert.equal(doc.openapi, '3.1.0');
  const result = await new Validator().validate(doc);
  assert.ok(result.valid, JSON.stringify(result.errors));
});

test('each operation states its security, and its errors as problem+json', async (t) => {
  const h = await apiHarness();
  t.after(() => h.close());
  const doc = (await h.app.inject({ url: '/v1/openapi.json' })).json();
  for (const [path, ops] of Object.entries<Record<string, Operation>>(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const where = `${method.toUpperCase()} ${path}`;
      const scope = op['x-converge-scope'];
      if (scope === undefined) assert.deepEqual(op.security, [], `${where} needs no token`);
      else {
        assert.deepEqual(op.security, [{ bearer: [scope] }], `${where} needs a ${scope} token`);
        for (const st of ['401', '403']) assert.ok(op.responses[st], `${where} documents ${st}`);
      }
      for (const [status, res] of Object.entries(op.responses)) {
        if (Number(status) >= 400) assert.deepEqual(Object.keys(res.content ?? {}), ['application/problem+json'], `${where} ${status}`);
      }
    }
  }
});

test('POST declarations documents the 413 and 415 it answers, and /v1/events the Last-Event-ID it reads', async (t) => {
  const h = await apiHarness();
  t.after(() => h.close());
  const doc = (await h.app.inject({ url: '/v1/openapi.json' })).json();
  const post: Operation = doc.paths['/v1/nodes/{node}/declarations'].post;
  assert.ok(post.responses['413'], 'a body over the limit is documented');
  assert.ok(post.responses['415'], 'a body that is not JSON is documented');
  assert.deepEqual(Object.keys(post.requestBody?.content ?? {}), ['application/json']);
  const events: Operation = doc.paths['/v1/events'].get;
  const header = events.parameters?.find((p) => p.in === 'header' && p.name.toLowerCase() === 'last-event-id');
  assert.ok(header !== undefined, 'Last-Event-ID is a documented header parameter');
  assert.equal(header.required, false);
});
