import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { ConvergeError } from '../../errors.ts';
import type { RouteContext } from '../nodeViews.ts';
import { json, route } from '../routeOptions.ts';
import * as s from '../schemas.ts';

// DESIGN §6: liveness of the process and readiness of the projections, with their lag.

export const healthRoutes: FastifyPluginAsyncZod<RouteContext> = async (app, { deps }) => {
  const { readModel, projections } = deps;

  app.get(
    '/healthz',
    route(null, 'probe', {
      operationId: 'healthz',
      summary: 'Liveness of the process, with projection lag',
      response: { 200: json('the process is up', s.health) },
    }),
    async () => ({
      ok: true,
      ready: projections?.isReady() ?? true,
      lag: ((await projections?.lag()) ?? 0n).toString(),
      position: readModel.position()?.toString() ?? null,
    }),
  );

  app.get(
    '/readyz',
    route(null, 'probe', {
      operationId: 'readyz',
      summary: 'Ready once projections have caught up with the store',
      response: { 200: json('projections caught up', s.health) },
      errors: { 503: 'projections still catching up, or stopped on an event whose fold failed' },
    }),
    async () => {
      const lag = (await projections?.lag()) ?? 0n;
      const failed = projections?.failure?.() ?? null;
      if (failed !== null) {
        throw new ConvergeError(
          'CONVERGE_ERR_PROJECTION_FAILED',
          `projections stopped on ${failed.type} at position ${failed.position}: ${failed.message}`,
          {
            details: { position: failed.position.toString(), id: failed.id, type: failed.type, node: failed.node, lag: lag.toString() },
          },
        );
      }
      if (!(projections?.isReady() ?? true)) {
        throw new ConvergeError('CONVERGE_ERR_NOT_READY', `projections are ${lag} events behind the store`, {
          details: { lag: lag.toString() },
        });
      }
      return { ok: true, ready: true, lag: lag.toString(), position: readModel.position()?.toString() ?? null };
    },
  );
};
