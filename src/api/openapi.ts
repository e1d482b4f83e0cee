import { z } from 'zod';
import { errorCodes } from '../errors.ts';
import type { Scope } from './auth.ts';
import { apiRegistry } from './schemas.ts';

// /v1/openapi.json, generated from the same zod schemas the handlers parse with (DESIGN §7).
// OpenAPI 3.1 because its schema dialect is JSON Schema 2020-12, which is what zod emits.

export type ResponseDoc = Readonly<{ schema?: z.ZodType; description: string; contentType?: string }>;

export type RouteDoc = Readonly<{
  method: 'GET' | 'POST';
  url: string;
  scope: Scope | null;
  operationId: string;
  summary: string;
  params?: z.ZodType;
  query?: z.ZodType;
  body?: z.ZodType;
  responses: Readonly<Record<number, ResponseDoc>>;
}>;

type Json = Record<string, unknown>;

const ref = (schema: z.ZodType): Json => {
  const meta = apiRegistry.get(schema);
  if (meta === undefined) return strip(z.toJSONSchema(schema, { unrepresentable: 'any' }) as Json);
  return { $ref: `#/components/schemas/${meta.id}` };
};

const strip = (j: Json): Json => {
  const { $schema: _s, $id: _i, ...rest } = j;
  return rest;
};

/** Query and path schemas are objects; OpenAPI wants one parameter per property. */
function parametersOf(schema: z.ZodType | undefined, where: 'path' | 'query'): Json[] {
  if (schema === undefined) return [];
  const j = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as { properties?: Record<string, Json>; required?: string[] };
  return Object.entries(j.properties ?? {}).map(([name, prop]) => {
    const { description, ...rest } = prop;
    return {
      name,
      in: where,
      required: where === 'path' || (j.required ?? []).includes(name),
      ...(typeof description === 'string' ? { description } : {}),
      schema: rest,
    };
  });
}

const errorStatuses = (r: RouteDoc): number[] => {
  const out = new Set<number>([400, 500]);
  if (r.scope !== null) {
    out.add(401);
    out.add(403);
  }
  return [...out];
};

export function buildOpenApi(routes: readonly RouteDoc[]): Json {
  const components = z.toJSONSchema(apiRegistry, { uri: (id) => `#/components/schemas/${id}`, unrepresentable: 'any' }) as {
    schemas: Record<string, Json>;
  };
  const schemas: Record<string, Json> = {};
  for (const [id, schema] of Object.entries(components.schemas)) schemas[id] = strip(schema);

  const paths: Record<string, Record<string, Json>> = {};
  for (const r of routes) {
    const path = r.url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
    const responses: Record<string, Json> = {};
    for (const [status, doc] of Object.entries(r.responses)) {
      const type = doc.contentType ?? (Number(status) >= 400 ? 'application/problem+json' : 'application/json');
      responses[status] = {
        description: doc.description,
        content: {
          [type]: {
            schema:
              doc.schema !== undefined
                ? ref(doc.schema)
                : Number(status) >= 400
                  ? { $ref: '#/components/schemas/Problem' }
                  : type === 'application/json'
                    ? {}
                    : { type: 'string' },
          },
        },
      };
    }
    for (const st of errorStatuses(r)) {
      responses[String(st)] ??= {
        description:
          st === 401
            ? 'missing or invalid bearer token'
            : st === 403
              ? 'token lacks the scope'
              : st === 400
                ? 'invalid parameters or body'
                : 'internal error',
        content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
      };
    }
    const op: Json = {
      operationId: r.operationId,
      summary: r.summary,
      parameters: [...parametersOf(r.params, 'path'), ...parametersOf(r.query, 'query')],
      responses,
      ...(r.scope === null ? { security: [] } : { security: [{ bearer: [r.scope] }], 'x-converge-scope': r.scope }),
      ...(r.body === undefined ? {} : { requestBody: { required: true, content: { 'application/json': { schema: ref(r.body) } } } }),
    };
    (paths[path] ??= {})[r.method.toLowerCase()] = op;
  }

  return {
    openapi: '3.1.0',
    info: {
      title: 'Converge',
      version: '1',
      description:
        'Event-sourced convergence engine. Errors are application/problem+json with a stable `code`: ' + Object.keys(errorCodes).join(', '),
    },
    paths,
    components: {
      schemas,
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'CONVERGE_API_TOKENS: `<token>:<scopes>` entries; scopes read, send' },
      },
    },
  };
}
