import { createPublicKey } from 'node:crypto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { defaultGraceMs } from '../../../projections/index.ts';
import { ConvergeError } from '../../core/errors.ts';
import { buildEvidence } from '../../readModel/evidence/build.ts';
import { momentQuery, orderedWindowQuery } from '../momentQuery.ts';
import type { RouteContext } from '../routeContext.ts';
import { json, route } from '../routeOptions.ts';
import * as s from '../schemas.ts';
import { evidenceBundle, evidenceQuery } from '../schemas/evidence.ts';

// GET /v1/nodes/:node/evidence (docs/api.md#evidence-bundles): the same bundle as `converge audit
// export`, built by the same code (src/readModel/evidence/build.ts), with the engine's own audit
// and declaration public keys in it when it has them.

export const evidenceRoutes: FastifyPluginAsyncZod<RouteContext> = async (app, { deps, views }) => {
  const { store, graceMs } = deps;
  const auditKey = deps.auditKey === undefined || deps.auditKey === null ? null : createPublicKey(deps.auditKey);
  const declarationKey = deps.declarationKey ?? null;

  app.get(
    '/v1/nodes/:node/evidence',
    route('read', 'api', {
      operationId: 'getEvidence',
      summary: "An evidence bundle of a node's answer as of a moment, checkable offline with converge audit check",
      params: s.nodeParams,
      querystring: evidenceQuery,
      response: { 200: json('the bundle; save it as a file and run converge audit check on it', evidenceBundle) },
      errors: {
        404: 'no such node',
        409: 'no signed checkpoint covers the events (CONVERGE_ERR_EVIDENCE_UNSIGNED); ask with unsigned=true',
      },
    }),
    async ({ params, query }, reply) => {
      const window = query.at !== undefined && query.from === undefined && query.to === undefined;
      const ranged = query.at === undefined && query.from !== undefined && query.to !== undefined;
      if (!window && !ranged) throw new ConvergeError('CONVERGE_ERR_BAD_REQUEST', 'query: give at, or from and to');
      const atText = (query.at ?? query.to)!;
      const at = momentQuery(query.at === undefined ? 'to' : 'at', atText);
      if (query.from !== undefined) orderedWindowQuery({ text: query.from, at: momentQuery('from', query.from) }, { text: atText, at });
      const bundle = await buildEvidence(await (deps.pastReads?.() ?? store), {
        node: params.node,
        at,
        atText,
        from: query.from ?? null,
        graceMs: graceMs ?? defaultGraceMs,
        auditKey,
        declarationKey,
        unsigned: query.unsigned === 'true',
        now: views.now,
      });
      const name = `evidence-${params.node}-${atText.replace(/[^0-9A-Za-z]/g, '')}.json`;
      void reply.header('content-disposition', `attachment; filename="${name}"`);
      return bundle;
    },
  );
};
