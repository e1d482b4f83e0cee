import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { RouteContext } from '../nodeViews.ts';
import { json, route } from '../routeOptions.ts';
import * as s from '../schemas.ts';

// DESIGN §7: the fleet at a glance, from counters the read model keeps as events fold (O(cohorts), not O(nodes)).

export const fleetRoutes: FastifyPluginAsyncZod<RouteContext> = async (app, { deps, views }) => {
  app.get(
    '/v1/fleet',
    route('read', 'api', {
      operationId: 'getFleet',
      summary: 'Counts by status and liveness, spec cohorts, convergence latency',
      response: { 200: json('the fleet summary', s.fleet) },
    }),
    async () => ({
      ...deps.readModel.fleet(views.now()),
      position: deps.readModel.position()?.toString() ?? null,
      ready: deps.projections?.isReady() ?? true,
    }),
  );
};
