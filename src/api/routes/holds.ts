import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { setHold } from '../../engine/holds.ts';
import { authorize } from '../auth.ts';
import type { RouteContext } from '../routeContext.ts';
import { json, route } from '../routeOptions.ts';
import * as s from '../schemas.ts';

// docs/design.md §8 "Holds and pins": hold (rollouts skip the node), release, pin (the node keeps
// its spec: rollouts skip it, a direct send needs force) and unpin, each an event in the `holds` stream.

export const holdRoutes: FastifyPluginAsyncZod<RouteContext> = async (app, { deps, views }) => {
  app.post(
    '/v1/nodes/:node/:verb',
    route('send', 'api', {
      operationId: 'holdNode',
      summary: 'Hold, release, pin or unpin a node (verb: hold | release | pin | unpin)',
      params: s.holdVerbParams,
      body: s.holdBody.optional(),
      response: { 200: json('recorded in the holds stream', s.nodeHold) },
      errors: {
        404: 'no event has ever named this node',
        409: 'held (pinned) already, or not held (pinned) to release (unpin)',
      },
    }),
    async ({ params, body, headers }) => {
      const token = authorize(deps.tokens, headers.authorization, 'send');
      const r = await setHold(deps.store, params.node, params.verb, {
        now: new Date(views.now()),
        by: token === null ? 'api' : `api token ${token.id}`,
        ...(body?.reason === undefined ? {} : { reason: body.reason }),
      });
      // Read-your-writes: the node view read next shows it.
      await views.holds.refresh();
      return { node: r.node, held: r.hold.held, pinned: r.hold.pinned, position: (r.position ?? 0n).toString() };
    },
  );
};
