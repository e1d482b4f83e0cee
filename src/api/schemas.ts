import { z } from 'zod';
import {
  conditionReasons,
  conditionStatuses,
  conditionTypes,
  livenessStates,
  nodeStatuses,
  reportClasses,
} from '../../projections/index.ts';
import { nodeEventTypes } from '../core/events/index.ts';

// Zod schemas of everything the HTTP API reads and writes (docs/design.md §7); the rollouts' are in
// schemas/rollouts.ts and re-exported here, so the OpenAPI document and the dashboard's types still
// read the API's one contract from one module. Routes declare them, the type provider validates requests with them and types
// the handlers from them, and
// /v1/openapi.json is generated from them, so the document cannot drift from what the code
// accepts. Registered (named) schemas become components referenced by $ref; path, query and
// header schemas stay unnamed because OpenAPI lists them property by property as parameters.
// Response arrays are `.readonly()` so the read model's readonly values type-check as replies.

export { apiRegistry, maxNodeIdLength, named, resource } from './schemas/base.ts';
import { digest, iso, maxNodeIdLength, named, position, resource } from './schemas/base.ts';

export const statusEnum = z.enum(nodeStatuses);
export const livenessEnum = z.enum(livenessStates);
export const reportClassEnum = z.enum(reportClasses);

export const nodeParams = z.object({ node: z.string().min(1).max(maxNodeIdLength) });

export const problem = named(
  'Problem',
  z.object({
    type: z.string(),
    title: z.string(),
    status: z.number().int(),
    detail: z.string(),
    code: z.string().describe('stable error code, see docs/errors.md'),
    instance: z.string().optional(),
    details: z.record(z.string(), z.unknown()).optional(),
  }),
  'RFC 9457 problem details with a stable Converge error code',
);

export const liveness = named(
  'Liveness',
  z.object({
    state: livenessEnum,
    lastSeenAt: iso.nullable(),
    disconnectedForMs: z.number().int().min(0),
    reason: z
      .string()
      .optional()
      .describe('with `not-observed` in the current view: why this engine cannot say (it runs no ingest and no engine observes now)'),
  }),
);

export const condition = named(
  'Condition',
  z.object({
    type: z.enum(conditionTypes),
    status: z.enum(conditionStatuses),
    reason: z.enum(conditionReasons).describe('one word of a closed list (docs/api.md#conditions)'),
    message: z.string().describe('for people: the serials, digests and times behind the reason'),
    lastTransitionTime: iso
      .nullable()
      .describe('the time of the event that made the condition what it is (never the time of the read); null when no event says'),
  }),
  'Why the node is or is not converged, caught up, connected (Kubernetes-style)',
);

export const anomalies = named('Anomalies', z.object({ stale: z.number().int(), unknown: z.number().int(), undeclared: z.number().int() }));

const holdMark = z.object({ by: z.string(), reason: z.string(), at: iso });

export const nodeView = named(
  'NodeState',
  z.object({
    node: z.string(),
    status: statusEnum,
    caughtUp: z.boolean(),
    sent: z
      .object({
        digest,
        specDigest: digest.describe('sha256 of the resources alone: the same for every node sent this spec'),
        serial: z.number().int(),
        sentAt: iso,
        acknowledgedAt: iso.nullable(),
        resourceIds: z.array(z.string()).readonly(),
      })
      .nullable(),
    reported: z
      .object({
        declared: digest.nullable(),
        receivedAt: iso,
        applied: z.array(z.string()).readonly(),
        failed: z.record(z.string(), z.string()),
        refused: z.string(),
        carried: z.array(z.number().int()).readonly(),
        class: reportClassEnum,
      })
      .nullable(),
    missing: z.array(z.string()).readonly(),
    carried: z.array(z.number().int()).readonly(),
    liveness,
    conditions: z.array(condition).readonly().describe('Converged, CaughtUp and Connected, in that order'),
    anomalies,
    convergence: z.object({ lastLatencyMs: z.number().nullable(), acknowledged: z.number().int(), superseded: z.number().int() }),
    reports: z.number().int(),
    retiredAt: iso
      .nullable()
      .describe('when the node was retired (out of the fleet views until a send brings it back); null: in the fleet'),
    held: holdMark.nullable().optional().describe('held: rollouts skip the node (docs/design.md §8 "Holds and pins"); null: not held'),
    pinned: holdMark
      .nullable()
      .optional()
      .describe('pinned: the node keeps its spec (rollouts skip it, a direct send needs force); null: not pinned'),
    position,
  }),
  "One node's state: caughtUp means the latest report names the latest sent digest (docs/design.md §3)",
);

export const holdBody = z.object({ reason: z.string().max(1024).optional().describe('why, for the record') }).strict();
export const holdVerbParams = z.object({
  node: z.string().min(1).max(maxNodeIdLength),
  verb: z.enum(['hold', 'release', 'pin', 'unpin']),
});
export const nodeHold = named(
  'NodeHold',
  z.object({ node: z.string(), held: holdMark.nullable(), pinned: holdMark.nullable(), position }),
  'The node\'s hold and pin after the command, recorded in the `holds` stream (docs/design.md §8 "Holds and pins")',
);
export const retireBody = z.object({ reason: z.string().max(1024).optional().describe('why, for the record') }).strict();
export const nodeRetired = named(
  'NodeRetired',
  z.object({ node: z.string(), retiredAt: iso, position }),
  'The node is retired: out of the fleet views and counts, its history kept (docs/design.md §3)',
);

export const nodesQuery = z.object({
  status: statusEnum.optional(),
  liveness: livenessEnum.optional(),
  digest: digest.optional().describe('nodes sent or running this declaration digest'),
  spec: digest.optional().describe('nodes whose latest send has this spec digest'),
  limit: z.coerce.number().int().min(1).max(5_000).default(500).describe('nodes per page (default 500, at most 5,000)'),
  after: z.string().min(1).max(maxNodeIdLength).optional().describe('only nodes whose id sorts after this one: pass `next` to page'),
  prefix: z.string().min(1).max(maxNodeIdLength).optional().describe("only nodes whose id starts with this (the dashboard's id search)"),
});

export const nodeList = named(
  'NodeList',
  z.object({
    count: z.number().int().describe('nodes in this page'),
    total: z.number().int().describe('nodes matching the filters, on every page'),
    nodes: z.array(nodeView).readonly(),
    next: z.string().nullable().describe('pass as `after` for the next page; null on the last page'),
  }),
  'A page of node states in node id order',
);

export const historyQuery = z.object({
  limit: z.coerce.number().int().min(1).max(1000).default(100),
  before: position.optional().describe('only events with a position below this one (exclusive): pass `next` to page'),
});

export const historyEntry = named(
  'HistoryEntry',
  z.object({
    position,
    revision: position,
    id: z.string(),
    type: z.enum(nodeEventTypes),
    at: iso,
    data: z.record(z.string(), z.unknown()),
  }),
);

export const history = named(
  'History',
  z.object({ node: z.string(), events: z.array(historyEntry).readonly(), next: position.nullable() }),
);

export const stateQuery = z.object({ at: z.string().min(1).describe('an ISO 8601 time or a decimal store position') });

export const stateAtResponse = named(
  'StateAt',
  z.object({ at: z.string(), folded: z.number().int(), state: nodeView }),
  "A node's state as of a time or position: the same fold, stopped",
);

export const awaitQuery = z.object({
  digest: digest.optional().describe('default: whatever is latest sent when the node catches up'),
  timeoutMs: z.coerce.number().int().min(0).max(300_000).default(30_000),
});

export const declarationBody = named(
  'DeclarationBody',
  z
    .strictObject({
      resources: z.array(resource).max(10_000).optional(),
      force: z.boolean().optional().describe('send to a pinned node too (default false: a pinned node answers 409)'),
      asOf: z
        .string()
        .min(1)
        .max(64)
        .optional()
        .describe(
          'send again the spec the node had been sent at this moment (the latest send at or before it, by stream order): an ISO 8601 time with its zone, or a store position (all digits); a time to come or a position past the head is 400',
        ),
    })
    .refine((b) => (b.resources === undefined) !== (b.asOf === undefined), 'give resources or asOf, exactly one'),
  'The resources to send, or a moment whose spec to send again',
);
export const declarationAccepted = named(
  'DeclarationAccepted',
  z.object({ node: z.string(), digest, serial: z.number().int().min(1) }),
  'Recorded in the store (the outbox) and queued for the relay',
);

/** POST /v1/declarations: many nodes in one store transaction; at most serve --max-bulk-declarations (checked by the route). */
export const declarationBatchBody = named(
  'DeclarationBatch',
  z
    .array(
      z.strictObject({
        node: z.string().min(1).max(maxNodeIdLength),
        resources: z.array(resource).max(10_000),
        force: z.boolean().optional().describe('send to this node even if it is pinned'),
      }),
    )
    .min(1),
  'Declarations for many nodes, recorded in one store transaction; each node at most once; at most serve --max-bulk-declarations (default 1,000)',
);
export const declarationBatchAccepted = named(
  'DeclarationBatchAccepted',
  z.object({
    sent: z.number().int().describe('nodes whose declaration was recorded'),
    refused: z.number().int().describe('nodes refused (their own code and message below); nothing was recorded for them'),
    results: z
      .array(
        z.union([
          z.object({ node: z.string(), ok: z.literal(true), digest, serial: z.number().int().min(1) }),
          z.object({ node: z.string(), ok: z.literal(false), code: z.string(), message: z.string() }),
        ]),
      )
      .readonly()
      .describe('one per item, in the order given'),
  }),
  'What became of each node: recorded and queued for the relay, or refused',
);

export const fleet = named(
  'Fleet',
  z.object({
    nodes: z.number().int(),
    byStatus: z.record(statusEnum, z.number().int()),
    byLiveness: z.record(livenessEnum, z.number().int()),
    cohorts: z
      .array(
        z.object({
          spec: digest,
          nodes: z.number().int(),
          caughtUp: z.number().int(),
          byStatus: z.record(statusEnum, z.number().int()),
        }),
      )
      .readonly()
      .describe('the largest cohorts of nodes by the spec digest of their latest send'),
    otherCohorts: z
      .object({ cohorts: z.number().int(), nodes: z.number().int(), caughtUp: z.number().int() })
      .describe('the cohorts not listed, summed'),
    convergence: z.object({
      samples: z.number().int(),
      p50Ms: z.number().nullable(),
      p90Ms: z.number().nullable(),
      p99Ms: z.number().nullable(),
      maxMs: z.number().nullable(),
      superseded: z.number().int(),
      acknowledged: z.number().int(),
    }),
    anomalies,
    position: position.nullable(),
    ready: z.boolean(),
    observation: z
      .object({ observed: z.boolean(), reason: z.string().nullable() })
      .optional()
      .describe(
        'the fleet now: whether this engine can judge liveness; when not (no ingest, and no engine observes), every node counts as `not-observed` and `reason` says why',
      ),
    at: z.string().optional().describe('the `at` asked for (absent: the fleet now)'),
    moment: iso
      .nullable()
      .optional()
      .describe('with `at`: the time liveness is judged at, the asked time or the time of the asked position (to the second)'),
  }),
  'The fleet summary, now or as of a time or position (every node folded up to it, docs/design.md §3)',
);

// GET /v1/fleet?at=: the fleet as of a moment, for the dashboard's time travel.
export const fleetQuery = z.object({
  at: z
    .string()
    .min(1)
    .optional()
    .describe(
      'an ISO 8601 time or a decimal store position: the fleet as of that moment (each node folded up to it, liveness judged then); absent: now',
    ),
});

// GET /v1/nodes/:node/timeline: a node's events as the dashboard shows them, each
// report classified and each race (a report the old clock rule counted as caught up) marked.
export const timelineQuery = z.object({
  limit: z.coerce.number().int().min(1).max(1000).default(100),
  before: position.optional().describe('only events with a position below this one (exclusive): pass `next` to page'),
});

export const timelineEntry = named(
  'TimelineEntry',
  z.object({
    position,
    type: z.enum(nodeEventTypes),
    at: iso,
    digest: digest.nullable().describe('DeclarationSent: its digest; ReportReceived: the digest it names (null: a legacy report)'),
    serial: z.number().int().nullable().describe('the serial of that digest, if it was ever sent to this node'),
    class: reportClassEnum.nullable().describe('ReportReceived: how it relates to what had been sent when it arrived'),
    duplicate: z.boolean().describe('the same report delivered again: it changes nothing'),
    status: statusEnum.describe('the node status after this event'),
    race: z
      .object({ sentSerial: z.number().int(), sentDigest: digest, sentAt: iso })
      .nullable()
      .describe('a report the clock rule would have counted as caught up with this send; the digest rule does not'),
    silentForMs: z
      .number()
      .nullable()
      .describe('a sign of life after a silence longer than the grace period: how long the node was silent'),
    declaration: z
      .object({
        outcome: z.enum(['acknowledged', 'superseded', 'pending']),
        acknowledgedAt: iso.nullable(),
        latencyMs: z.number().nullable(),
        supersededAt: iso.nullable(),
        resourceIds: z.array(z.string()).readonly(),
      })
      .nullable()
      .describe('DeclarationSent: what became of it'),
    report: z
      .object({
        applied: z.array(z.string()).readonly(),
        failed: z.record(z.string(), z.string()),
        refused: z.string(),
        carried: z.array(z.number().int()).readonly(),
      })
      .nullable(),
  }),
);

export const timeline = named(
  'Timeline',
  z.object({ node: z.string(), events: z.number().int(), entries: z.array(timelineEntry).readonly(), next: position.nullable() }),
  "A node's events newest first, classified as the fold saw them",
);

export const eventsQuery = z.object({
  node: z.string().min(1).optional().describe("only this node's changes (and no rollout's, unless `rollout` is given too)"),
  rollout: z.string().min(1).optional().describe("only this rollout's changes (and no node's, unless `node` is given too)"),
});

// z.looseObject: the validated headers replace request.headers, so every other header stays.
export const eventsHeaders = z.looseObject({
  'last-event-id': position.optional().describe('resume after this position: the id of the last event received'),
});

const componentHealth = named(
  'ComponentHealth',
  z.object({
    healthy: z.boolean(),
    lastSuccessAt: z.string().nullable().describe('when it last appended (ingest) or published (relay)'),
    failingSince: z.string().nullable(),
    error: z.string().nullable().describe('the last failure, `CODE: message`'),
    pending: z.number().int().optional().describe('ingest: deliveries held, not yet acked or refused'),
  }),
  'One part of the write path; absent when this engine does not run it (no broker)',
);

export const health = named(
  'Health',
  z.object({
    ok: z.boolean(),
    ready: z.boolean(),
    lag: position,
    position: position.nullable(),
    ingest: componentHealth.optional(),
    relay: componentHealth.optional(),
  }),
);

export const metricsText = z.string().describe('Prometheus text exposition format');
export const openApiDocument = z.looseObject({ openapi: z.string() }).describe('OpenAPI 3.1 document');
export const eventStream = z
  .string()
  .describe('`event: node`, `id: <position>`, `data: <NodeState JSON>`; and `event: rollout`, `data: <Rollout JSON>` (docs/api.md)');

export * from './schemas/rollouts.ts';
