import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { RolloutState } from '../../core/rollout/index.ts';
import { ConvergeError } from '../../core/errors.ts';
import type { RolloutView } from '../../readModel/rollouts.ts';
import { parseMoment } from '../../engine/specAsOf.ts';
import { authorize } from '../auth.ts';
import type { RolloutCommands } from '../deps.ts';
import type { RouteContext } from '../routeContext.ts';
import { json, route } from '../routeOptions.ts';
import * as s from '../schemas.ts';

// Rollouts. Reads come from the live view the projection runner keeps
// (src/readModel/rollouts.ts); the commands are the engine's (src/engine/rolloutCommands.ts),
// given by the composition root. A command answers once the view shows what it wrote, so a read
// right after it sees it (as POST declarations does).

export type RolloutRouteContext = RouteContext & Readonly<{ rollouts: RolloutView }>;

const notFound = (id: string): ConvergeError =>
  new ConvergeError('CONVERGE_ERR_ROLLOUT_NOT_FOUND', `no rollout named ${JSON.stringify(id)}`, { details: { rollout: id } });

/** Resolves true once `ready()` holds (checked on every change of the rollout), false at the timeout. */
function waitForView(view: RolloutView, id: string, ready: () => boolean, timeoutMs: number): Promise<boolean> {
  if (ready()) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      stop();
      resolve(false);
    }, timeoutMs);
    const stop = view.onChange((c) => {
      if (c.rollout !== id || !ready()) return;
      clearTimeout(timer);
      stop();
      resolve(true);
    });
  });
}

export const rolloutRoutes: FastifyPluginAsyncZod<RolloutRouteContext> = async (app, { deps, views, rollouts }) => {
  const visibleMs = deps.sendVisibleMs ?? 5_000;
  const commands = (): RolloutCommands => {
    if (deps.rolloutCommands === undefined)
      throw new ConvergeError('CONVERGE_ERR_INTERNAL', 'this API instance has no rollout commands configured');
    return deps.rolloutCommands;
  };
  /** Who did it, for the record: the token's id (a hash prefix, never the token). */
  const who = (authorization: string | undefined): string => {
    const token = authorize(deps.tokens, authorization, 'send');
    return token === null ? 'api' : `api token ${token.id}`;
  };
  const summaryOf = (id: string) => {
    const out = rollouts.summary(id, views.now());
    if (out === undefined) throw notFound(id);
    return out;
  };
  /** After a command: wait until the view folded the stream as far as the command left it. */
  const visible = async (after: RolloutState) => {
    await waitForView(rollouts, after.id, () => (rollouts.get(after.id)?.revision ?? -1n) >= after.revision, visibleMs);
    return summaryOf(after.id);
  };

  app.get(
    '/v1/rollouts',
    route('read', 'api', {
      operationId: 'listRollouts',
      summary: 'Rollouts, newest first, with how their waves stand',
      querystring: s.rolloutsQuery,
      response: { 200: json('rollouts, newest start first', s.rolloutList) },
    }),
    async ({ query }) => {
      const now = views.now();
      const all = rollouts.list().filter((r) => query.status === undefined || r.status === query.status);
      const shown = all.slice(0, query.limit).flatMap((r) => rollouts.summary(r.id, now) ?? []);
      return { count: shown.length, total: all.length, rollouts: shown };
    },
  );

  app.get(
    '/v1/rollouts/:id',
    route('read', 'api', {
      operationId: 'getRollout',
      summary: 'One rollout: status, per wave done / pending / failed / superseded, p50/p99 convergence, ETA',
      params: s.rolloutIdParams,
      response: { 200: json('the rollout', s.rolloutSummary) },
      errors: { 404: 'no rollout has this id' },
    }),
    async ({ params }) => summaryOf(params.id),
  );

  app.get(
    '/v1/rollouts/:id/nodes',
    route('read', 'api', {
      operationId: 'listRolloutNodes',
      summary: "A rollout's targets in wave order, each with its outcome, in pages",
      params: s.rolloutIdParams,
      querystring: s.rolloutNodesQuery,
      response: { 200: json('a page of targets; pass `next` as `after` for the next', s.rolloutNodes) },
      errors: { 404: 'no rollout has this id' },
    }),
    async ({ params, query }) => {
      const page = rollouts.nodes(params.id, {
        limit: query.limit,
        ...(query.wave === undefined ? {} : { wave: query.wave }),
        ...(query.outcome === undefined ? {} : { outcome: query.outcome }),
        ...(query.after === undefined ? {} : { after: query.after }),
      });
      if (page === undefined) throw notFound(params.id);
      return page;
    },
  );

  app.post(
    '/v1/rollouts',
    {
      ...route('send', 'api', {
        operationId: 'startRollout',
        summary: 'Start a rollout: record the plan; the engine opens the waves',
        body: s.rolloutStartBody,
        response: { 202: json('recorded; the engine opens the first wave', s.rolloutStarted) },
      }),
      // An explicit node list of a large fleet is larger than a declaration.
      bodyLimit: 16 * 1024 * 1024,
    },
    async ({ body, headers }, reply) => {
      const { selection } = body;
      const r = await commands().start({
        ...(body.rollout === undefined ? {} : { rollout: body.rollout }),
        resources: body.resources ?? [],
        ...(body.asOf === undefined ? {} : { asOf: parseMoment(body.asOf, 'CONVERGE_ERR_ROLLOUT_PLAN') }),
        selection: selection.kind === 'nodes' ? { kind: 'nodes', nodes: selection.nodes ?? [] } : selection,
        waves: body.waves,
        ...(body.maxFailures === undefined ? {} : { maxFailures: body.maxFailures }),
        ...(body.abortOn === undefined ? {} : { abortOn: body.abortOn }),
        waveTimeoutMs: body.waveTimeoutMs,
        ...(body.pauseMs === undefined ? {} : { pauseMs: body.pauseMs }),
        ...(body.onSuperseded === undefined ? {} : { onSuperseded: body.onSuperseded }),
        ...(body.rollbackOnHalt === undefined ? {} : { rollbackOnHalt: body.rollbackOnHalt }),
        ...(body.gate === undefined ? {} : { gate: body.gate }),
        ...(body.rate === undefined ? {} : { rate: body.rate }),
        ...(body.ramp === undefined ? {} : { ramp: body.ramp }),
        startedBy: who(headers.authorization),
      });
      await waitForView(rollouts, r.rollout, () => rollouts.get(r.rollout) !== undefined, visibleMs);
      reply.code(202).header('location', `/v1/rollouts/${r.rollout}`);
      return { rollout: r.rollout, targets: r.targets, waves: r.waves };
    },
  );

  for (const action of ['pause', 'resume', 'abort'] as const) {
    app.post(
      `/v1/rollouts/:id/${action}`,
      route('send', 'api', {
        operationId: `${action}Rollout`,
        summary:
          action === 'pause'
            ? 'Pause a rollout: no wave opens and nothing is sent; the open wave’s timeout stops running'
            : action === 'resume'
              ? 'Resume a paused rollout'
              : 'Abort a rollout for good: nothing more is sent (what was sent is not taken back)',
        params: s.rolloutIdParams,
        body: s.rolloutCommandBody,
        response: { 200: json('the rollout once the engine shows the change', s.rolloutSummary) },
        errors: { 404: 'no rollout has this id', 409: 'the rollout is not in a state that allows this' },
      }),
      async ({ params, body, headers }) => {
        const by = who(headers.authorization);
        const c = commands();
        const after =
          action === 'resume' ? await c.resume(params.id, { by }) : await c[action](params.id, { by, reason: body.reason ?? '' });
        return visible(after);
      },
    );
  }

  app.post(
    '/v1/rollouts/:id/rollback',
    route('send', 'api', {
      operationId: 'rollbackRollout',
      summary:
        'Roll a rollout back: its waves end, and each node it sent its spec to (scope all, or the wave) is sent its previous spec again',
      params: s.rolloutIdParams,
      body: s.rollbackBody,
      response: { 200: json('the rollout once the engine shows the rollback begun', s.rolloutSummary) },
      errors: { 404: 'no rollout has this id', 409: 'the rollout is rolling back, or was rolled back, already' },
    }),
    async ({ params, body, headers }) => {
      const after = await commands().rollback(params.id, {
        by: who(headers.authorization),
        reason: body.reason ?? '',
        ...(body.scope === undefined ? {} : { scope: body.scope }),
      });
      return visible(after);
    },
  );
};
