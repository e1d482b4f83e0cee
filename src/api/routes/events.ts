import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { RouteContext } from '../routeContext.ts';
import type { RolloutRouteContext } from './rollouts.ts';
import { route } from '../routeOptions.ts';
import * as s from '../schemas.ts';
import { defaultStreamMaxMs, streamChanges } from '../sse.ts';

// docs/design.md §7: server-sent events, one per node state change and one per rollout change,
// resumable with Last-Event-ID.

export const eventRoutes: FastifyPluginAsyncZod<RouteContext & Partial<Pick<RolloutRouteContext, 'rollouts'>>> = async (
  app,
  { deps, views, rollouts },
) => {
  // An open stream is a request that never ends: end them all when the app closes, or stopping
  // `serve` waits on every dashboard left open (the client resumes with Last-Event-ID).
  const open = new Set<() => void>();
  app.addHook('preClose', async () => {
    for (const close of [...open]) close();
  });

  app.get(
    '/v1/events',
    route(
      'read',
      'stream',
      {
        operationId: 'streamEvents',
        summary:
          'Server-sent events, one per node state change (`node`) and per rollout change (`rollout`); id = position, resume with Last-Event-ID',
        querystring: s.eventsQuery,
        headers: s.eventsHeaders,
        response: {
          200: {
            description: 'one event per node state change or rollout change',
            content: { 'text/event-stream': { schema: s.eventStream } },
          },
        },
      },
      'stream',
    ),
    async ({ query, headers }, reply) => {
      const after = headers['last-event-id'];
      // Who observes, as the stream opens; later changes reach the read model as their events fold (liveObservation.ts).
      await views.observation();
      streamChanges({
        readModel: deps.readModel,
        reply,
        view: views.view,
        node: query.node ?? null,
        ...(rollouts === undefined ? {} : { rollouts }),
        rollout: query.rollout ?? null,
        now: views.now,
        after: after === undefined ? null : BigInt(after),
        heartbeatMs: deps.heartbeatMs ?? 15_000,
        maxMs: deps.streamMaxMs ?? defaultStreamMaxMs,
        open,
      });
      return reply;
    },
  );
};
