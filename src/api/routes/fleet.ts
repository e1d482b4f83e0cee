import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { momentQuery } from '../momentQuery.ts';
import type { FleetHistory } from '../../readModel/fleetHistory.ts';
import type { RouteContext } from '../routeContext.ts';
import { json, route } from '../routeOptions.ts';
import * as s from '../schemas.ts';

// docs/design.md §7: the fleet at a glance, from counters the read model keeps as events fold (O(cohorts), not O(nodes)).
// With `at`, the fleet as of that moment, from the history src/readModel/fleetHistory.ts
// keeps as the read model folds (created in buildApp, before the projections start).

export type FleetRouteContext = RouteContext & Readonly<{ fleetHistory: FleetHistory }>;

export const fleetRoutes: FastifyPluginAsyncZod<FleetRouteContext> = async (app, { deps, views, fleetHistory }) => {
  app.get(
    '/v1/fleet',
    route('read', 'api', {
      operationId: 'getFleet',
      summary: 'Counts by status and liveness, spec cohorts, convergence latency; now, or as of a time or position',
      querystring: s.fleetQuery,
      response: { 200: json('the fleet summary; with `at`, as of that moment', s.fleet) },
    }),
    async ({ query }) => {
      const ready = deps.projections?.isReady() ?? true;
      if (query.at !== undefined) {
        const at = momentQuery('at', query.at);
        return { ...(await fleetHistory.at(at)), at: query.at, ready };
      }
      await views.observation();
      const reason = deps.readModel.unobserved();
      return {
        ...deps.readModel.fleet(views.now()),
        // Whether the counts by liveness are this engine's judgement, or not-observed and why (docs/design.md §3).
        observation: { observed: reason === null, reason },
        position: deps.readModel.position()?.toString() ?? null,
        ready,
      };
    },
  );
};
