import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { ConvergeError } from '../../core/errors.ts';
import { waitForSend } from '../../readModel/waitForNode.ts';
import { parseMoment, specAsOf } from '../../engine/specAsOf.ts';
import { defaultMaxEventBytes } from '../../store/index.ts';
import type { RouteContext } from '../routeContext.ts';
import { json, route } from '../routeOptions.ts';
import { traceDeclarations } from '../traceDeclarations.ts';
import { checkBulkSize, defaultWriteLimits } from '../writeLimits.ts';
import * as s from '../schemas.ts';

// POST a declaration: it is signed, recorded in the store (the outbox) and relayed
// (docs/design.md#7-interfaces-people-and-programs-touch-kept-stable). POST many, one per node,
// recorded in one store transaction.

export const declarationRoutes: FastifyPluginAsyncZod<RouteContext> = async (app, { deps }) => {
  const maxBulk = deps.writeLimits?.maxBulkDeclarations ?? defaultWriteLimits.maxBulkDeclarations;
  app.post(
    '/v1/nodes/:node/declarations',
    {
      ...route('send', 'api', {
        operationId: 'sendDeclaration',
        summary: 'Sign, record and send a declaration',
        params: s.nodeParams,
        body: s.declarationBody,
        response: { 202: json('recorded in the store and queued for the node', s.declarationAccepted) },
        errors: {
          404: 'asOf: the node had been sent nothing at or before that moment',
          409: 'a resource asks for a port the node carries, or the node is pinned (send with force)',
        },
      }),
      // A body that cannot fit in one event cannot be recorded: refuse it before reading it.
      bodyLimit: deps.maxEventBytes ?? defaultMaxEventBytes,
    },
    async ({ params, body }, reply) => {
      const send = deps.send;
      if (send === undefined) throw new ConvergeError('CONVERGE_ERR_INTERNAL', 'this API instance has no sender configured');
      // The sender validates the spec (and the node id), as it does for the CLI and the bulk route.
      // asOf: the exact resources of the node's latest send at or before that time or position,
      // signed anew; read and refused as a rollout's asOf is (400 for a time to come or a position past the head).
      const resources =
        body.asOf !== undefined
          ? (
              await specAsOf(
                await (deps.pastReads?.() ?? deps.store),
                params.node,
                parseMoment(body.asOf, 'CONVERGE_ERR_BAD_REQUEST'),
                new Date(deps.now?.() ?? Date.now()),
                'CONVERGE_ERR_BAD_REQUEST',
              )
            ).resources
          : (body.resources ?? []);
      // A pinned node keeps its spec: refused with 409 unless the body says force (docs/design.md §8).
      const r = await traceDeclarations(
        'POST /v1/nodes/:node/declarations',
        () => send(params.node, resources, body.force === true ? { force: true } : {}),
        (x) => [x.digest],
      );
      // Read-your-writes: a client that awaits or reads right after a 202 sees its own send. The
      // declaration is recorded either way, so this wait never turns the answer into an error.
      await waitForSend(deps.readModel, params.node, r.serial, deps.sendVisibleMs ?? 5_000);
      reply.code(202).header('location', `/v1/nodes/${encodeURIComponent(params.node)}`);
      return { node: params.node, digest: r.digest, serial: r.serial };
    },
  );

  app.post(
    '/v1/declarations',
    {
      ...route('send', 'api', {
        operationId: 'sendDeclarations',
        summary: 'Sign and record declarations for many nodes in one store transaction',
        body: s.declarationBatchBody,
        response: {
          202: json('every item answered: recorded and queued for its node, or refused with its own code', s.declarationBatchAccepted),
        },
      }),
      // 16 KiB a declaration (16 MiB for the default 1,000), at least one event; each spec must
      // still fit one event (the store refuses the call otherwise).
      bodyLimit: Math.max(deps.maxEventBytes ?? defaultMaxEventBytes, 16 * 1024 * 1024, 16 * 1024 * maxBulk),
      // Counted before zod checks each item, so the answer names the limit.
      preValidation: (req, _reply, done) => {
        try {
          checkBulkSize(maxBulk, req.body);
        } catch (err) {
          done(err as Error);
          return;
        }
        done();
      },
    },
    async ({ body }, reply) => {
      const sendMany = deps.sendMany;
      if (sendMany === undefined) throw new ConvergeError('CONVERGE_ERR_INTERNAL', 'this API instance has no sender configured');
      const { outcomes } = await traceDeclarations(
        'POST /v1/declarations',
        () => sendMany(body),
        (x) => x.outcomes.flatMap((o) => (o.ok ? [o.digest] : [])),
      );
      // Read-your-writes, as for one node: the batch is one append, so once its last declaration
      // is folded every one before it is too.
      const last = outcomes.findLast((o) => o.ok);
      if (last !== undefined && last.ok) await waitForSend(deps.readModel, last.node, last.serial, deps.sendVisibleMs ?? 5_000);
      const sent = outcomes.filter((o) => o.ok).length;
      reply.code(202);
      return { sent, refused: outcomes.length - sent, results: outcomes };
    },
  );
};
