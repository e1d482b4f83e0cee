import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { momentQuery } from '../momentQuery.ts';
import { ConvergeError } from '../../core/errors.ts';
import { historyPage, stateAsOf } from '../../readModel/queries.ts';
import { waitForNode } from '../../readModel/waitForNode.ts';
import { retireNode } from '../../engine/retire.ts';
import type { RouteContext } from '../routeContext.ts';
import { json, route } from '../routeOptions.ts';
import * as s from '../schemas.ts';

// docs/design.md §7: node states, one node, its history, its state as of a time, and the long poll.

export const nodeRoutes: FastifyPluginAsyncZod<RouteContext> = async (app, { deps, views }) => {
  const { readModel, store, graceMs } = deps;
  const past = deps.pastReads ?? (() => Promise.resolve(store));
  // An await is a request that lasts up to its timeoutMs: closing the app ends each one still
  // waiting, or stopping `serve` waited up to 5 minutes on them (docs/operations.md#shutting-down).
  const stopping = new AbortController();
  app.addHook('preClose', async () => stopping.abort());

  // Answered from the read model's index of nodes (readModel.page): filters, cursor and total there.
  app.get(
    '/v1/nodes',
    route('read', 'api', {
      operationId: 'listNodes',
      summary: 'Node states, filterable, in pages by node id',
      querystring: s.nodesQuery,
      response: { 200: json('matching nodes, sorted by id', s.nodeList) },
    }),
    async ({ query }) => {
      await Promise.all([views.holds.refresh(), views.observation()]);
      const at = views.now();
      const page = readModel.page(query, at);
      return { count: page.states.length, total: page.total, nodes: page.states.map((st) => views.view(st, at)), next: page.next };
    },
  );

  app.get(
    '/v1/nodes/:node',
    route('read', 'api', {
      operationId: 'getNode',
      summary: "One node's state",
      params: s.nodeParams,
      response: { 200: json("the node's state", s.nodeView) },
      errors: { 404: 'no event has ever named this node' },
    }),
    async ({ params }) => {
      const st = views.known(params.node);
      await Promise.all([views.holds.refresh(), views.observation()]);
      return views.view(st);
    },
  );

  // docs/design.md §3 "Retired nodes": the node leaves the fleet's views; its history stays.
  app.post(
    '/v1/nodes/:node/retire',
    route('send', 'api', {
      operationId: 'retireNode',
      summary: 'Retire a decommissioned node: out of the fleet views and counts, its history kept',
      params: s.nodeParams,
      body: s.retireBody,
      response: { 200: json('NodeRetired recorded in the node stream', s.nodeRetired) },
      errors: { 404: 'no event has ever named this node', 409: 'the node is retired already' },
    }),
    async ({ params, body }) => {
      const r = await retireNode(store, params.node, {
        now: new Date(views.now()),
        ...(body.reason === undefined ? {} : { reason: body.reason }),
      });
      // Read-your-writes: the fleet a client reads next leaves the node out.
      await waitForNode(readModel, params.node, (x) => x.retiredAt !== null, deps.sendVisibleMs ?? 5_000);
      return { node: r.node, retiredAt: r.retiredAt, position: (r.position ?? r.state.position).toString() };
    },
  );

  app.get(
    '/v1/nodes/:node/history',
    route('read', 'api', {
      operationId: 'getHistory',
      summary: "A node's events, newest first, with positions",
      params: s.nodeParams,
      querystring: s.historyQuery,
      response: { 200: json('a page of events; pass `next` as `before` for the following page', s.history) },
      errors: { 404: 'no such node' },
    }),
    async ({ params, query }) =>
      historyPage(await past(), params.node, query.limit, query.before === undefined ? null : BigInt(query.before)),
  );

  app.get(
    '/v1/nodes/:node/state',
    route('read', 'api', {
      operationId: 'getStateAt',
      summary: "A node's state as of a time or position",
      params: s.nodeParams,
      querystring: s.stateQuery,
      response: { 200: json('the fold stopped at `at`', s.stateAtResponse) },
      errors: { 404: 'no such node' },
    }),
    async ({ params, query }) => {
      const at = momentQuery('at', query.at);
      const r = await stateAsOf(await past(), params.node, at, graceMs);
      return { at: query.at, folded: r.folded, state: r.state };
    },
  );

  app.get(
    '/v1/nodes/:node/await',
    route(
      'read',
      'api',
      {
        operationId: 'awaitNode',
        summary: 'Wait until the node is caught up with a digest (default: the latest sent)',
        params: s.nodeParams,
        querystring: s.awaitQuery,
        response: { 200: json('the node is caught up with the digest', s.nodeView) },
        errors: {
          404: 'no such node',
          408: 'the node did not catch up before timeoutMs',
          503: 'the engine is stopping (CONVERGE_ERR_STOPPING)',
        },
      },
      'await',
    ),
    async ({ params, query }, reply) => {
      views.known(params.node);
      const want = query.digest;
      const abort = new AbortController();
      const onClose = (): void => abort.abort();
      reply.raw.once('close', onClose);
      stopping.signal.addEventListener('abort', onClose, { once: true });
      try {
        const st = await waitForNode(
          readModel,
          params.node,
          (x) => x.caughtUp && (want === undefined || x.sent?.digest === want),
          query.timeoutMs,
          abort.signal,
        );
        if (st === null && stopping.signal.aborted)
          throw new ConvergeError('CONVERGE_ERR_STOPPING', `the engine is stopping: ask again for node ${params.node}`, {
            details: { node: params.node },
          });
        await views.observation();
        if (st === null) {
          const cur = readModel.get(params.node);
          throw new ConvergeError(
            'CONVERGE_ERR_AWAIT_TIMEOUT',
            `node ${params.node} did not catch up with ${want ?? 'its latest declaration'} within ${query.timeoutMs} ms`,
            {
              details: {
                node: params.node,
                digest: want ?? cur?.sent?.digest ?? null,
                latestSent: cur?.sent?.digest ?? null,
                reported: cur?.reported?.declared ?? null,
                status: cur?.status ?? null,
              },
            },
          );
        }
        return views.view(st);
      } finally {
        reply.raw.off('close', onClose);
        stopping.signal.removeEventListener('abort', onClose);
      }
    },
  );
};
