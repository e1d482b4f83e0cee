import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { timelinePage } from '../../readModel/nodeTimeline.ts';
import type { RouteContext } from '../routeContext.ts';
import { json, route } from '../routeOptions.ts';
import * as s from '../schemas.ts';

// A node's events as the dashboard shows them (src/readModel/nodeTimeline.ts).

export const timelineRoutes: FastifyPluginAsyncZod<RouteContext> = async (app, { deps }) => {
  app.get(
    '/v1/nodes/:node/timeline',
    route('read', 'api', {
      operationId: 'getTimeline',
      summary: "A node's events newest first, each report classified and each race marked",
      params: s.nodeParams,
      querystring: s.timelineQuery,
      response: { 200: json('a page of the timeline; pass `next` as `before` for the following page', s.timeline) },
      errors: { 404: 'no such node' },
    }),
    async ({ params, query }) =>
      timelinePage(
        await (deps.pastReads?.() ?? deps.store),
        params.node,
        query.limit,
        query.before === undefined ? null : BigInt(query.before),
        deps.graceMs,
      ),
  );
};
