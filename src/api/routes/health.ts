import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { ConvergeError } from '../../core/errors.ts';
import type { ComponentHealth } from '../../engine/health.ts';
import type { RouteContext } from '../routeContext.ts';
import { json, route } from '../routeOptions.ts';
import * as s from '../schemas.ts';

// Liveness of the process and readiness of the projections, with their lag, and of the write
// path: ingest appending and the relay publishing (docs/design.md#6-operating-it; with SQLite
// full, both probes once said ready while every report was held). /healthz stays 200 whatever the parts say
// — restarting the process empties no disk — and shows them; /readyz is 503 while one fails.

const componentView = (c: ComponentHealth) => ({
  healthy: c.healthy,
  lastSuccessAt: c.lastSuccessAt?.toISOString() ?? null,
  failingSince: c.failingSince?.toISOString() ?? null,
  error: c.error,
  ...(c.pending === undefined ? {} : { pending: c.pending }),
});

export const healthRoutes: FastifyPluginAsyncZod<RouteContext> = async (app, { deps }) => {
  const { readModel, projections } = deps;
  const now = deps.now ?? Date.now;
  const parts = () => {
    const p = deps.pipeline?.() ?? { ingest: null, relay: null };
    return {
      ...(p.ingest === null ? {} : { ingest: componentView(p.ingest) }),
      ...(p.relay === null ? {} : { relay: componentView(p.relay) }),
    };
  };
  const failing = (what: 'ingest' | 'relay', c: ComponentHealth | null): ConvergeError | null => {
    if (c === null || c.healthy) return null;
    const failingSinceMs = c.failingSince === null ? 0 : now() - c.failingSince.getTime();
    const details = {
      failingSinceMs,
      lastSuccessAt: c.lastSuccessAt?.toISOString() ?? null,
      error: c.error,
      ...(c.pending === undefined ? {} : { pending: c.pending }),
    };
    return what === 'ingest'
      ? new ConvergeError(
          'CONVERGE_ERR_INGEST_FAILING',
          `ingest cannot append to the store (for ${failingSinceMs} ms; ${c.pending ?? 0} deliveries held unacked): ${c.error}`,
          { details },
        )
      : new ConvergeError('CONVERGE_ERR_RELAY_FAILING', `the relay cannot publish declarations (for ${failingSinceMs} ms): ${c.error}`, {
          details,
        });
  };

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
      ...parts(),
    }),
  );

  app.get(
    '/readyz',
    route(null, 'probe', {
      operationId: 'readyz',
      summary: 'Ready once projections have caught up with the store, while ingest appends and the relay publishes',
      response: { 200: json('projections caught up, ingest and relay working', s.health) },
      errors: {
        503: 'projections still catching up or stopped on an event whose fold failed; ingest failing to append; the relay failing to publish',
      },
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
      const p = deps.pipeline?.() ?? { ingest: null, relay: null };
      const broken = failing('ingest', p.ingest) ?? failing('relay', p.relay);
      if (broken !== null) throw broken;
      if (!(projections?.isReady() ?? true)) {
        const position = readModel.position();
        const head = (position ?? 0n) + lag;
        throw new ConvergeError(
          'CONVERGE_ERR_NOT_READY',
          `catching up: projections are ${lag} events behind the store (at ${position ?? 'no event yet'} of ${head})`,
          { details: { lag: lag.toString(), position: position?.toString() ?? null, head: head.toString() } },
        );
      }
      return { ok: true, ready: true, lag: lag.toString(), position: readModel.position()?.toString() ?? null, ...parts() };
    },
  );
};
