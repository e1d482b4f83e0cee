import fastifySwagger from '@fastify/swagger';
import Fastify from 'fastify';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { validatorCompiler } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { authenticate, bearerChallenge } from './auth.ts';
import { checkBodyHeaders, closeIfBodyUnread, useJsonBodies } from './bodyPolicy.ts';
import { clientOf, createCapTable, defaultCaps, holdPlace } from './connectionCaps.ts';
import type { ApiDeps } from './deps.ts';
import { nodeViews } from './nodeViews.ts';
import type { RouteContext } from './routeContext.ts';
import { openApiOptions } from './openapi.ts';
import { classify, frameworkProblem, problemOf, sendProblem } from './problem.ts';
import { logLevelOf, RequestLog, requestSerializers } from './requestLog.ts';
import { applyHeaderPolicy } from './responseHeaders.ts';
import { dashboardRoutes } from './routes/dashboard.ts';
import { declarationRoutes } from './routes/declarations.ts';
import { holdRoutes } from './routes/holds.ts';
import { eventRoutes } from './routes/events.ts';
import { evidenceRoutes } from './routes/evidence.ts';
import { fleetRoutes } from './routes/fleet.ts';
import { healthRoutes } from './routes/health.ts';
import { capConnections, closeSocketsWhenClosing, defaultListenerLimits, listenerOptions } from './listenerLimits.ts';
import type { ListenerOptions } from './listenerLimits.ts';
import { metricsRoutes } from './routes/metrics.ts';
import { nodeRoutes } from './routes/nodes.ts';
import { rolloutRoutes } from './routes/rollouts.ts';
import { openApiRoutes } from './routes/openapi.ts';
import { timelineRoutes } from './routes/timeline.ts';
import { createFleetHistory } from '../readModel/fleetHistory.ts';
import { createRolloutView } from '../readModel/rollouts.ts';
import { maxNodeIdLength } from './schemas.ts';
import { chargeBodies, checkWriteRate, createByteRate, defaultWriteLimits } from './writeLimits.ts';
import { ConvergeError } from '../core/errors.ts';

// The HTTP API (docs/design.md#7-interfaces-people-and-programs-touch-kept-stable): one fastify plugin per resource (routes/), composed here with what
// every request goes through. buildApp returns an instance that is not listening (tests use
// inject; listen.ts opens the socket).

export type { ApiDeps, SendDeclaration, ProjectionStatus } from './deps.ts';

/**
 * Every route's query schema made strict as the route is added: a parameter the route does not
 * know (`/v1/nodes?caughtUp=true`) is a 400 naming it, not a filter silently ignored. Done here
 * rather than in each schema so a new route cannot forget it.
 */
function refuseUnknownQueryParameters(app: FastifyInstance): void {
  app.addHook('onRoute', (r) => {
    const query = (r.schema as { querystring?: unknown } | undefined)?.querystring;
    if (query instanceof z.ZodObject) r.schema = { ...r.schema, querystring: query.strict() };
  });
}

/** The fastify instance both listeners start from: logging, errors as problems, one policy per route kind. */
function baseApp(deps: ApiDeps, extra: ListenerOptions) {
  // A child logger per request (fastify's req.log); headers are never logged (requestLog.ts),
  // and the redaction stays in case a later log line carries them.
  const logger = deps.logger.child(
    { component: 'api' },
    {
      redact: { paths: ['req.headers.authorization', 'req.headers.cookie', 'req.headers["x-api-key"]'], censor: '[redacted]' },
      serializers: requestSerializers,
    },
  );
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    logController: new RequestLog(),
    return503OnClosing: true,
    routerOptions: { maxParamLength: maxNodeIdLength },
    ...(deps.pluginTimeoutMs === undefined ? {} : { pluginTimeout: deps.pluginTimeoutMs }),
    // Before a route is found (a path segment over the limit, a URL that does not decode).
    frameworkErrors: (err, req, reply) => {
      applyHeaderPolicy(reply, 'api');
      const e = frameworkProblem(err);
      req.log.info({ code: e.code, detail: e.message }, 'request refused');
      closeIfBodyUnread(req, reply);
      sendProblem(reply, problemOf(e));
    },
    ...extra,
  }).withTypeProvider<ZodTypeProvider>();

  app.setValidatorCompiler(validatorCompiler);
  refuseUnknownQueryParameters(app);
  // Response schemas document the answers; serialising is plain JSON.stringify, as before the
  // type provider: validating every NodeState on the way out would cost the hottest route.
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));

  app.setErrorHandler((err, req, reply) => {
    const e = classify(err);
    const problem = problemOf(e, req.url);
    // A probe's 503 (not ready yet) is an answer, not a failure of the process; nor is a cap's.
    const kind = req.routeOptions.config.kind;
    if (problem.status >= 500 && kind !== 'probe' && e.code !== 'CONVERGE_ERR_SERVER_AT_CAP') req.log.error({ err }, 'request failed');
    else req.log[logLevelOf(kind)]({ code: e.code, detail: e.message }, 'request refused');
    const challenge = bearerChallenge(err);
    if (challenge !== null) void reply.header('www-authenticate', challenge);
    closeIfBodyUnread(req, reply);
    return sendProblem(reply, problem);
  });
  app.setNotFoundHandler((req, reply) => {
    closeIfBodyUnread(req, reply);
    return sendProblem(
      reply,
      problemOf(new ConvergeError('CONVERGE_ERR_ROUTE_NOT_FOUND', `no route ${req.method} ${req.url.split('?')[0] ?? ''}`), req.url),
    );
  });
  closeSocketsWhenClosing(app);
  return app;
}

export function buildApp(deps: ApiDeps): FastifyInstance {
  const limits = { ...defaultListenerLimits, ...deps.listener };
  const app = baseApp(deps, listenerOptions(limits));
  capConnections(app, limits, deps.metrics);
  const caps = createCapTable({ ...defaultCaps, ...deps.caps }, deps.metrics);
  useJsonBodies(app);
  const writeLimits = { ...defaultWriteLimits, ...deps.writeLimits };
  const rate = createByteRate(writeLimits.maxBytesPerTokenPerMinute, deps.monotonicNow ?? (() => performance.now()));
  // The token a write route's request is charged to, from onRequest to its body's charge.
  const tokenOf = new WeakMap<object, string>();
  chargeBodies(app, rate, (req) => tokenOf.get(req) ?? null);

  // One hook, before the body is read: headers by route kind, the token, the body's headers,
  // and for a request that stays open its place under the caps.
  // req.routeOptions builds a new object on each read: read it once.
  app.addHook('onRequest', (req, reply, done) => {
    const route = req.routeOptions;
    applyHeaderPolicy(reply, route.config.kind);
    try {
      const token = authenticate(deps.tokens, route.config.scope, req);
      if (token !== null) req.log = req.log.child({ token: token.id });
      checkBodyHeaders(req, route);
      if (token !== null && route.config.scope === 'send') {
        const client = clientOf(token.id, req.ip);
        tokenOf.set(req, client);
        checkWriteRate(rate, client, req, reply);
      }
      const cap = route.config.cap;
      if (cap !== undefined) {
        holdPlace(caps, cap, clientOf(token?.id ?? null, req.ip), reply);
        // Held open on purpose: not the inactivity timeout's to close (listenerLimits.ts).
        // (app.inject's socket is a stand-in without timeouts.)
        const socket = req.raw.socket as { setTimeout?: (ms: number) => unknown } | null;
        if (typeof socket?.setTimeout === 'function') socket.setTimeout(0);
      }
    } catch (err) {
      done(err as Error);
      return;
    }
    done();
  });

  const context: RouteContext = { deps, views: nodeViews(deps) };
  // Created now, before the projections start (src/app/lifecycle.ts), so a cold start records the
  // whole history once as it folds; plugins only run at ready/listen, after that.
  const fleetHistory = createFleetHistory({
    store: deps.store,
    readModel: deps.readModel,
    ...(deps.graceMs === undefined ? {} : { graceMs: deps.graceMs }),
    ...(deps.pastReads === undefined ? {} : { pastReads: deps.pastReads }),
  });
  app.addHook('onClose', async () => fleetHistory.stop());
  // The projection runner's view; one made here (before the projections start) when none is given.
  const rollouts = deps.rollouts ?? createRolloutView(deps.readModel);
  if (deps.rollouts === undefined) app.addHook('onClose', async () => rollouts.stop());
  void app.register(fastifySwagger, openApiOptions());
  void app.register(nodeRoutes, context);
  void app.register(declarationRoutes, context);
  void app.register(holdRoutes, context);
  void app.register(fleetRoutes, { ...context, fleetHistory });
  void app.register(timelineRoutes, context);
  void app.register(evidenceRoutes, context);
  void app.register(rolloutRoutes, { ...context, rollouts });
  void app.register(eventRoutes, { ...context, rollouts });
  void app.register(healthRoutes, context);
  void app.register(metricsRoutes, context);
  void app.register(openApiRoutes);
  if (deps.dashboardDir !== undefined && deps.dashboardDir !== null) void app.register(dashboardRoutes, { root: deps.dashboardDir });
  return app;
}

/**
 * The admin listener (`serve --admin-listen`): /healthz, /readyz and /metrics
 * only, on a socket of their own, so a probe or a scrape is answered whatever the main listener's
 * clients hold. Bind it where only the orchestrator and the scraper reach it: like the main
 * listener's probes, it asks for no token.
 */
export function buildAdminApp(deps: ApiDeps): FastifyInstance {
  const app = baseApp(deps, {});
  app.addHook('onRequest', (req, reply, done) => {
    applyHeaderPolicy(reply, req.routeOptions.config.kind ?? 'api');
    done();
  });
  const context: RouteContext = { deps, views: nodeViews(deps) };
  void app.register(healthRoutes, context);
  void app.register(metricsRoutes, context);
  return app;
}
