import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { ConvergeError } from '../../core/errors.ts';
import type { RouteContext } from '../routeContext.ts';
import { route } from '../routeOptions.ts';
import * as s from '../schemas.ts';

// docs/design.md §7: Prometheus metrics, refreshed from the read model at scrape time.

export const metricsRoutes: FastifyPluginAsyncZod<RouteContext> = async (app, { deps }) => {
  app.get(
    '/metrics',
    route(null, 'probe', {
      operationId: 'metrics',
      summary: 'Prometheus metrics',
      response: { 200: { description: 'Prometheus text exposition format', content: { 'text/plain': { schema: s.metricsText } } } },
    }),
    async (_req, reply) => {
      const registry = deps.metrics?.registry;
      if (registry === undefined) throw new ConvergeError('CONVERGE_ERR_INTERNAL', 'this API instance has no metrics registry');
      await deps.projections?.refreshMetrics?.();
      reply.type(registry.contentType);
      return registry.metrics();
    },
  );
};
