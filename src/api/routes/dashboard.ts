import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import fastifyStatic from '@fastify/static';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';

// The operator's dashboard: the static files `npm run build` puts in dist/dashboard,
// served at / and /nodes/:node (and /rollouts, /rollouts/:id). The page talks only to /v1 on the same origin, so the
// Content-Security-Policy can allow nothing but this origin: no inline script or style, no
// other host, no frames, no plugins. Nothing is fetched from elsewhere at run time.
//
// Caching: file names under /assets carry a content hash (Vite), so they never change and are
// cached for a year; the HTML and the icon are revalidated every time (ETag), so a new build is
// seen at the next load. Only / , /nodes/:node, /rollouts and /rollouts/:id answer with the page: an unknown path under
// /v1 still gets the API's problem+json 404. Every route here is of kind 'static' (no token, no
// no-store: src/api/responseHeaders.ts) and hidden from /v1/openapi.json.

export const dashboardCsp = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "font-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const immutable = 'public, max-age=31536000, immutable';
const revalidate = 'no-cache';

type HeaderTarget = Readonly<{ setHeader: (name: string, value: string) => unknown }>;

function securityHeaders(res: HeaderTarget): void {
  res.setHeader('content-security-policy', dashboardCsp);
  res.setHeader('x-content-type-options', 'nosniff');
  res.setHeader('referrer-policy', 'no-referrer');
  res.setHeader('x-frame-options', 'DENY');
  res.setHeader('cross-origin-opener-policy', 'same-origin');
  res.setHeader('cross-origin-resource-policy', 'same-origin');
}

export type DashboardOptions = Readonly<{ root: string }>;

/** Is there a built dashboard in this folder? */
export const isDashboardBuilt = (root: string): boolean => existsSync(join(root, 'index.html'));

export const dashboardRoutes: FastifyPluginAsync<DashboardOptions> = async (app, { root }) => {
  // The file routes @fastify/static adds below are tagged too: no scope, the static header policy.
  app.addHook('onRoute', (r) => {
    r.config = { ...r.config, scope: null, kind: 'static' };
  });
  // Read once: a rebuilt dashboard needs a restart anyway (the file routes below are listed at start).
  const page = readFileSync(join(root, 'index.html'));
  const sendPage = (reply: FastifyReply): FastifyReply => {
    securityHeaders(reply.raw);
    return reply.header('cache-control', revalidate).type('text/html; charset=utf-8').send(page);
  };
  const pageRoute = { logLevel: 'warn', schema: { hide: true } } as const;
  app.get('/', pageRoute, async (_req, reply) => sendPage(reply));
  app.get('/nodes/:node', pageRoute, async (_req, reply) => sendPage(reply));
  app.get('/rollouts', pageRoute, async (_req, reply) => sendPage(reply));
  app.get('/rollouts/:id', pageRoute, async (_req, reply) => sendPage(reply));

  await app.register(fastifyStatic, {
    root,
    prefix: '/',
    // One route per file found at start, instead of a catch-all that would answer for /v1/… too.
    wildcard: false,
    index: false,
    decorateReply: false,
    // Files compressed at build time (scripts/compressDashboard.mjs) are sent when the client accepts them.
    preCompressed: true,
    cacheControl: false,
    etag: true,
    lastModified: true,
    logLevel: 'warn',
    globIgnore: ['**/index.html'],
    setHeaders: (res, path) => {
      securityHeaders(res);
      res.setHeader('cache-control', path.includes('/assets/') ? immutable : revalidate);
      // The same URL answers brotli, gzip or identity bytes: a shared cache must key on the encoding.
      res.setHeader('vary', 'accept-encoding');
    },
  });
};
