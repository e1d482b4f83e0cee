import type { z } from 'zod';
import type { Scope } from './auth.ts';
import type { CapKind } from './connectionCaps.ts';
import * as s from './schemas.ts';

// What every route declares besides its handler, in one place: the token scope it needs, the
// kind of answer it gives (which sets its logging and caching policy), and its schemas. The
// same object is what fastify validates with, what the type provider types the handler from,
// and what @fastify/swagger documents.

/**
 * - `api`: JSON about the fleet; never cached.
 * - `probe`: /healthz, /readyz, /metrics; logged at debug, never cached.
 * - `stream`: server-sent events; the stream writes its own headers.
 * - `static`: files that may be cached (the dashboard's assets set their own Cache-Control).
 */
export type RouteKind = 'api' | 'probe' | 'stream' | 'static';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The token scope the route needs; absent or null: none. */
    scope?: Scope | null;
    kind?: RouteKind;
    /** A request that stays open, counted against the connection caps (connectionCaps.ts). */
    cap?: CapKind;
  }
}

type Content = Readonly<Record<string, { schema: z.ZodType }>>;
type Response = Readonly<{ description: string; content: Content }>;

export type RouteDoc = Readonly<{
  operationId: string;
  summary: string;
  params?: z.ZodType;
  querystring?: z.ZodType;
  headers?: z.ZodType;
  body?: z.ZodType;
  response: Readonly<Record<number, Response>>;
  /** Error answers particular to this route; 400 and 500 (and 401/403 with a scope, 413/415 with a body) are added. */
  errors?: Readonly<Record<number, string>>;
}>;

export const json = <T extends z.ZodType>(description: string, schema: T) =>
  ({ description, content: { 'application/json': { schema } } }) as const;

const problem = (description: string): Response => ({ description, content: { 'application/problem+json': { schema: s.problem } } });

function errorResponses(scope: Scope | null, doc: RouteDoc, cap: CapKind | undefined): Record<number, Response> {
  const out: Record<number, Response> = { 400: problem('invalid parameters or body') };
  if (scope !== null) {
    out[401] = problem('missing or invalid bearer token');
    out[403] = problem(`token lacks the ${scope} scope`);
  }
  if (doc.body !== undefined) {
    out[413] = problem('body larger than the route accepts (for a declaration: the store event limit); refused before it is read');
    out[415] = problem('body is not application/json (or has no content-type)');
  }
  if (scope === 'send')
    out[429] = problem(
      'this token sent more bytes of request bodies to write routes than serve --max-bytes-per-token-per-minute allows; see Retry-After',
    );
  if (cap !== undefined) {
    out[429] = problem('this token (with reads open: this address) holds as many open requests of this kind as it may; see Retry-After');
    out[503] = problem('the engine holds as many open requests of this kind as it serves at once; see Retry-After');
  }
  for (const [status, description] of Object.entries(doc.errors ?? {})) out[Number(status)] = problem(description);
  out[500] = problem('internal error');
  return out;
}

/**
 * Route options for `app.get(url, route(…), handler)`. The returned schema keeps the zod types
 * of `doc` so the handler's params, query, body and reply are inferred from them.
 */
export function route<const D extends RouteDoc>(scope: Scope | null, kind: RouteKind, doc: D, cap?: CapKind) {
  const { errors: _errors, response, ...rest } = doc;
  const schema = {
    ...rest,
    response: { ...response, ...errorResponses(scope, doc, cap) } as D['response'],
    security: scope === null ? [] : [{ bearer: [scope] }],
    ...(scope === null ? {} : { 'x-converge-scope': scope }),
  };
  return {
    config: { scope, kind, ...(cap === undefined ? {} : { cap }) },
    schema: schema as Omit<D, 'errors'> & { response: D['response'] },
  };
}
