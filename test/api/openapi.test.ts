import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createRequire } from 'node:module';
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

test('the OpenAPI document is 3.x, lists every DESIGN §7 route, resolves every $ref and its schemas compile', async (t) => {
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
  for (const [path, ops] of Object.entries<Record<string, { parameters: { schema: object }[] }>>(doc.paths)) {
    for (const op of Object.values(ops))
      for (const p of op.parameters) assert.doesNotThrow(() => ajv.compile(p.schema), `a parameter of ${path} compiles`);
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
