import Fastify from 'fastify';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import type { z } from 'zod';
import { nodeView as toView, parseAt, summarizeFleet } from '../../projections/index.ts';
import type { NodeState, NodeView } from '../../projections/index.ts';
import type { Resource } from '../declaration/index.ts';
import { validateSpec } from '../declaration/index.ts';
import { ConvergeError } from '../errors.ts';
import type { Metrics } from '../metrics.ts';
import type { ReadModel } from '../readModel/readModel.ts';
import { historyPage, nodeNotFound, stateAsOf, withExactLastSeen } from '../readModel/queries.ts';
import { waitForNode } from '../readModel/waitForNode.ts';
import type { EventStore } from '../store/index.ts';
import { authorize } from './auth.ts';
import type { Scope, TokenTable } from './auth.ts';
import { buildOpenApi } from './openapi.ts';
import type { RouteDoc } from './openapi.ts';
import { classify, problemOf, sendProblem } from './problem.ts';
import * as s from './schemas.ts';
import { streamChanges } from './sse.ts';

// The HTTP API of DESIGN §7. buildApp wires routes to their dependencies and returns a fastify
// instance that is not listening (tests use inject; listen.ts opens the socket).

export type SendDeclaration = (node: string, resources: readonly Resource[]) => Promise<Readonly<{ digest: string; serial: number }>>;

export type ProjectionStatus = Readonly<{
  isReady: () => boolean;
  lag: () => Promise<bigint>;
  refreshMetrics?: () => Promise<void>;
}>;

export type ApiDeps = Readonly<{
  readModel: ReadModel;
  store: EventStore;
  logger: Logger;
  tokens: TokenTable;
  projections?: ProjectionStatus;
  send?: SendDeclaration;
  metrics?: Metrics;
  /** Exact in-memory last-seen time kept by the ingest (DESIGN §2); the newer of it and the fold's wins. */
  lastSeen?: (node: string) => Date | string | null | undefined;
  graceMs?: number;
  now?: () => number;
  /** How long POST declarations waits for the projection to show the send (read-your-writes). */
  sendVisibleMs?: number;
  /** SSE heartbeat interval. */
  heartbeatMs?: number;
  bodyLimit?: number;
}>;

type Input<P, Q, B> = Readonly<{ params: P; query: Q; body: B; req: FastifyRequest; reply: FastifyReply }>;

type Route<P, Q, B> = RouteDoc & {
  handler: (input: Input<P, Q, B>) => Promise<unknown>;
};

const parse = <T>(schema: z.ZodType<T> | undefined, value: unknown, where: string): T => {
  if (schema === undefined) return undefined as T;
  const r = schema.safeParse(value ?? {});
  if (r.success) return r.data;
  const issues = r.error.issues.slice(0, 5).map((i) => ({ path: [where, ...i.path.map(String)].join('.'), message: i.message }));
  throw new ConvergeError('CONVERGE_ERR_BAD_REQUEST', issues.map((i) => `${i.path}: ${i.message}`).join('; '), { details: { issues } });
};

export function buildApp(deps: ApiDeps): FastifyInstance {
  const { readModel, store, tokens } = deps;
  const now = deps.now ?? Date.now;
  const graceMs = deps.graceMs;
  // Child logger per request (fastify's req.log) with the Authorization header redacted:
  // a token in a log line is a token anyone with log access can use.
  const logger = deps.logger.child(
    { component: 'api' },
    {
      redact: { paths: ['req.headers.authorization', 'req.headers.cookie', 'req.headers["x-api-key"]'], censor: '[redacted]' },
      serializers: {
        req: (req: FastifyRequest) => ({ method: req.method, url: req.url, headers: { ...req.headers }, remoteAddress: req.ip }),
        res: (res: FastifyReply) => ({ statusCode: res.statusCode }),
      },
    },
  );
  const app: FastifyInstance = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    bodyLimit: deps.bodyLimit ?? 4 * 1024 * 1024,
    return503OnClosing: true,
  });

  const withLastSeen = (st: NodeState): NodeState => withExactLastSeen(st, deps.lastSeen?.(st.node));
  const view = (st: NodeState, at: number = now()): NodeView => toView(withLastSeen(st), at, graceMs);
  const known = (node: string): NodeState => {
    const st = readModel.get(node);
    if (st === undefined) throw nodeNotFound(node);
    return st;
  };

  const routes: Route<never, never, never>[] = [];
  const add = <P, Q, B>(r: Route<P, Q, B>): void => {
    routes.push(r as unknown as Route<never, never, never>);
  };

  add({
    method: 'GET',
    url: '/v1/nodes',
    scope: 'read',
    operationId: 'listNodes',
    summary: 'Node states, filterable, in pages by node id',
    query: s.nodesQuery,
    responses: { 200: { schema: s.nodeList, description: 'matching nodes, sorted by id' } },
    handler: async ({ query }: Input<unknown, z.infer<typeof s.nodesQuery>, unknown>) => {
      const at = now();
      const matching: NodeView[] = [];
      for (const st of readModel.nodes()) {
        if (query.status !== undefined && st.status !== query.status) continue;
        if (query.spec !== undefined && st.sent?.specDigest !== query.spec) continue;
        if (query.digest !== undefined && st.sent?.digest !== query.digest && st.reported?.declared !== query.digest) continue;
        const v = view(st, at);
        if (query.liveness !== undefined && v.liveness.state !== query.liveness) continue;
        matching.push(v);
      }
      matching.sort((a, b) => (a.node < b.node ? -1 : a.node > b.node ? 1 : 0));
      const after = query.after;
      const from = after === undefined ? 0 : matching.findIndex((v) => v.node > after);
      const nodes = from < 0 ? [] : matching.slice(from, from + query.limit);
      const last = nodes.at(-1);
      const more = from >= 0 && from + nodes.length < matching.length;
      return { count: nodes.length, total: matching.length, nodes, next: more && last !== undefined ? last.node : null };
    },
  });

  add({
    method: 'GET',
    url: '/v1/nodes/:node',
    scope: 'read',
    operationId: 'getNode',
    summary: "One node's state",
    params: s.nodeParams,
    responses: { 200: { schema: s.nodeView, description: "the node's state" }, 404: { description: 'no event has ever named this node' } },
    handler: async ({ params }: Input<z.infer<typeof s.nodeParams>, unknown, unknown>) => view(known(params.node)),
  });

  add({
    method: 'GET',
    url: '/v1/nodes/:node/history',
    scope: 'read',
    operationId: 'getHistory',
    summary: "A node's events, newest first, with positions",
    params: s.nodeParams,
    query: s.historyQuery,
    responses: {
      200: { schema: s.history, description: 'a page of events; pass `next` as `before` for the following page' },
      404: { description: 'no such node' },
    },
    handler: async ({ params, query }: Input<z.infer<typeof s.nodeParams>, z.infer<typeof s.historyQuery>, unknown>) =>
      historyPage(store, params.node, query.limit, query.before === undefined ? null : BigInt(query.before)),
  });

  add({
    method: 'GET',
    url: '/v1/nodes/:node/state',
    scope: 'read',
    operationId: 'getStateAt',
    summary: "A node's state as of a time or position",
    params: s.nodeParams,
    query: s.stateQuery,
    responses: { 200: { schema: s.stateAtResponse, description: 'the fold stopped at `at`' }, 404: { description: 'no such node' } },
    handler: async ({ params, query }: Input<z.infer<typeof s.nodeParams>, z.infer<typeof s.stateQuery>, unknown>) => {
      const at = parseAt(query.at);
      if (at === null)
        throw new ConvergeError(
          'CONVERGE_ERR_BAD_REQUEST',
          `query.at: ${JSON.stringify(query.at)} is neither an ISO 8601 time nor a decimal position`,
        );
      const r = await stateAsOf(store, params.node, at, graceMs);
      return { at: query.at, folded: r.folded, state: r.state };
    },
  });

  add({
    method: 'GET',
    url: '/v1/nodes/:node/await',
    scope: 'read',
    operationId: 'awaitNode',
    summary: 'Wait until the node is caught up with a digest (default: the latest sent)',
    params: s.nodeParams,
    query: s.awaitQuery,
    responses: {
      200: { schema: s.nodeView, description: 'the node is caught up with the digest' },
      404: { description: 'no such node' },
      408: { description: 'the node did not catch up before timeoutMs' },
    },
    handler: async ({ params, query, reply }: Input<z.infer<typeof s.nodeParams>, z.infer<typeof s.awaitQuery>, unknown>) => {
      known(params.node);
      const want = query.digest;
      const abort = new AbortController();
      const onClose = (): void => abort.abort();
      reply.raw.once('close', onClose);
      try {
        const st = await waitForNode(
          readModel,
          params.node,
          (x) => x.caughtUp && (want === undefined || x.sent?.digest === want),
          query.timeoutMs,
          abort.signal,
        );
        if (st === null) {
          const cur = readModel.get(params.node);
          throw new ConvergeError(
            'CONVERGE_ERR_AWAIT_TIMEOUT',
            `node ${params.node} did not catch up with ${want ?? 'its latest declaration'} within ${query.timeoutMs} ms`,
            {
              details: {
                node: params.node,
                digest: want ?? cur?.sent?.digest ?? null,
                latestSent: cur?.sent?.digest ?? null,
                reported: cur?.reported?.declared ?? null,
                status: cur?.status ?? null,
              },
            },
          );
        }
        return view(st);
      } finally {
        reply.raw.off('close', onClose);
      }
    },
  });

  add({
    method: 'POST',
    url: '/v1/nodes/:node/declarations',
    scope: 'send',
    operationId: 'sendDeclaration',
    summary: 'Sign, record and send a declaration',
    params: s.nodeParams,
    body: s.declarationBody,
    responses: {
      202: { schema: s.declarationAccepted, description: 'recorded in the store and queued for the node' },
      409: { description: 'a resource asks for a port the node carries' },
    },
    handler: async ({ params, body, reply }: Input<z.infer<typeof s.nodeParams>, unknown, z.infer<typeof s.declarationBody>>) => {
      const send = deps.send;
      if (send === undefined) throw new ConvergeError('CONVERGE_ERR_INTERNAL', 'this API instance has no sender configured');
      const spec = validateSpec(body);
      const r = await send(params.node, spec.resources);
      // Read-your-writes: a client that awaits or reads right after a 202 sees its own send.
      await waitForNode(readModel, params.node, (x) => x.sentDigests.has(r.digest), deps.sendVisibleMs ?? 5_000);
      reply.code(202).header('location', `/v1/nodes/${encodeURIComponent(params.node)}`);
      return { node: params.node, digest: r.digest, serial: r.serial };
    },
  });

  add({
    method: 'GET',
    url: '/v1/fleet',
    scope: 'read',
    operationId: 'getFleet',
    summary: 'Counts by status and liveness, digest cohorts, convergence latency',
    responses: { 200: { schema: s.fleet, description: 'the fleet summary' } },
    handler: async () => {
      const states = [...readModel.nodes()].map(withLastSeen);
      return {
        ...summarizeFleet(states, now(), graceMs),
        position: readModel.position()?.toString() ?? null,
        ready: deps.projections?.isReady() ?? true,
      };
    },
  });

  add({
    method: 'GET',
    url: '/v1/events',
    scope: 'read',
    operationId: 'streamEvents',
    summary: 'Server-sent events, one per node state change; id = position, resume with Last-Event-ID',
    query: s.eventsQuery,
    responses: { 200: { contentType: 'text/event-stream', description: '`event: node`, `id: <position>`, `data: <NodeState JSON>`' } },
    handler: async ({ query, req, reply }: Input<unknown, z.infer<typeof s.eventsQuery>, unknown>) => {
      const header = req.headers['last-event-id'];
      const raw = Array.isArray(header) ? header[0] : header;
      if (raw !== undefined && !/^\d{1,20}$/.test(raw))
        throw new ConvergeError('CONVERGE_ERR_BAD_REQUEST', 'Last-Event-ID must be a decimal position');
      streamChanges({
        readModel,
        reply,
        view,
        node: query.node ?? null,
        after: raw === undefined ? null : BigInt(raw),
        heartbeatMs: deps.heartbeatMs ?? 15_000,
      });
      return reply;
    },
  });

  add({
    method: 'GET',
    url: '/healthz',
    scope: null,
    operationId: 'healthz',
    summary: 'Liveness of the process, with projection lag',
    responses: { 200: { schema: s.health, description: 'the process is up' } },
    handler: async () => ({
      ok: true,
      ready: deps.projections?.isReady() ?? true,
      lag: ((await deps.projections?.lag()) ?? 0n).toString(),
      position: readModel.position()?.toString() ?? null,
    }),
  });

  add({
    method: 'GET',
    url: '/readyz',
    scope: null,
    operationId: 'readyz',
    summary: 'Ready once projections have caught up with the store',
    responses: { 200: { schema: s.health, description: 'projections caught up' }, 503: { description: 'projections still catching up' } },
    handler: async () => {
      const lag = (await deps.projections?.lag()) ?? 0n;
      if (!(deps.projections?.isReady() ?? true)) {
        throw new ConvergeError('CONVERGE_ERR_NOT_READY', `projections are ${lag} events behind the store`, {
          details: { lag: lag.toString() },
        });
      }
      return { ok: true, ready: true, lag: lag.toString(), position: readModel.position()?.toString() ?? null };
    },
  });

  add({
    method: 'GET',
    url: '/metrics',
    scope: null,
    operationId: 'metrics',
    summary: 'Prometheus metrics',
    responses: { 200: { contentType: 'text/plain', description: 'Prometheus text exposition format' } },
    handler: async ({ reply }) => {
      const registry = deps.metrics?.registry;
      if (registry === undefined) throw new ConvergeError('CONVERGE_ERR_INTERNAL', 'this API instance has no metrics registry');
      await deps.projections?.refreshMetrics?.();
      reply.type(registry.contentType);
      return registry.metrics();
    },
  });

  const openapi = buildOpenApi(routes);
  add({
    method: 'GET',
    url: '/v1/openapi.json',
    scope: null,
    operationId: 'openapi',
    summary: 'This document',
    responses: { 200: { contentType: 'application/json', description: 'OpenAPI 3.1 document' } },
    handler: async () => openapi,
  });

  for (const r of routes) {
    app.route({
      method: r.method,
      url: r.url,
      handler: async (req, reply) => {
        if (r.scope !== null) {
          const token = authorize(tokens, req.headers.authorization, r.scope as Scope);
          if (token !== null) req.log = req.log.child({ token: token.id });
        }
        const params = parse(r.params, req.params, 'params');
        const query = parse(r.query, req.query, 'query');
        const body = parse(r.body, req.body, 'body');
        return r.handler({ params, query, body, req, reply } as never);
      },
    });
  }

  app.setErrorHandler((err, req, reply) => {
    const e = classify(err);
    const problem = problemOf(e, req.url);
    if (problem.status >= 500) req.log.error({ err }, 'request failed');
    else req.log.info({ code: e.code, detail: e.message }, 'request refused');
    return sendProblem(reply, problem);
  });
  app.setNotFoundHandler((req, reply) =>
    sendProblem(
      reply,
      problemOf(new ConvergeError('CONVERGE_ERR_ROUTE_NOT_FOUND', `no route ${req.method} ${req.url.split('?')[0] ?? ''}`), req.url),
    ),
  );
  return app;
}
