import type { FastifyReply } from 'fastify';
import type { RouteKind } from './routeOptions.ts';

// No answer may be sniffed into another type, and nothing about the fleet may be
// kept by a cache (it changes by the second and may be behind a token). Static files are the
// exception: they set their own Cache-Control. Set in onRequest, so errors carry them too.

const apiHeaders = { 'x-content-type-options': 'nosniff', 'cache-control': 'no-store' } as const;
const staticHeaders = { 'x-content-type-options': 'nosniff' } as const;

/** The headers every answer of this kind of route carries (a stream writes its own, see sse.ts). */
export const headersFor = (kind: RouteKind | undefined): Readonly<Record<string, string>> =>
  kind === 'static' ? staticHeaders : apiHeaders;

export function applyHeaderPolicy(reply: FastifyReply, kind: RouteKind | undefined): void {
  reply.headers(headersFor(kind));
}
