import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { summarizeFleet } from '../../../projections/index.ts';
import type { RouteContext } from '../nodeViews.ts';
import { json, route } from '../routeOptions.ts';
import * as s from '../schemas.ts';

// DESIGN §7: the fleet at a glance. One summary call, so it can later be answered from counters.

export const fleetRoutes: FastifyPluginAsyncZod<RouteContext> = async (app, { deps, views }) => {
  app.get(
    '/v1/fleet',
    route('read', 'api', {
      operationId: 'getFleet',
      summary: 'Counts by status and liveness, spec cohorts, convergence latency',
      response: { 200: json('the fleet summary', s.fleet) },
    }),
    async () => ({
      ...summarizeFleet([...deps.readModel.nodes()].map(views.withLastSeen), views.now(), deps.graceMs),
      position: deps.readModel.position()?.toString() ?? null,
      ready: deps.projections?.isReady() ?? true,
    }),
  );
};
