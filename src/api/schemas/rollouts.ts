import { z } from 'zod';
import { nodeOutcomes, rolloutStatuses } from '../../core/rollout/index.ts';
import {
  failureReasons,
  maxRolloutDurationMs,
  onSupersededPolicies,
  rolloutGate,
  rolloutRamp,
  rolloutRate,
  rollbackPolicies,
  rollbackScopes,
  rolloutIdPattern,
} from '../../core/events/index.ts';
import { digest, iso, maxNodeIdLength, named, position, resource } from './base.ts';

// The rollout schemas of the HTTP API (docs/design.md §8), split from schemas.ts, which re-exports them.

// Rollouts (docs/design.md §8).

export const rolloutStatusEnum = z.enum(rolloutStatuses);
export const nodeOutcomeEnum = z.enum(nodeOutcomes);
export const rolloutIdParams = z.object({ id: z.string().regex(rolloutIdPattern, 'a rollout id is 1-63 of a-z 0-9 . _ -') });

const count = z.number().int().min(0);
const failure = z.object({ node: z.string(), reason: z.enum(failureReasons), detail: z.string() });

export const rolloutSelection = named(
  'RolloutSelection',
  z.discriminatedUnion('kind', [
    z.object({ kind: z.literal('nodes'), nodes: z.array(z.string().min(1).max(maxNodeIdLength)).min(1).max(1_000_000).optional() }),
    z.object({ kind: z.literal('all') }),
    z.object({ kind: z.literal('spec'), specDigest: digest }),
    z.object({ kind: z.literal('prefix'), prefix: z.string().min(1).max(maxNodeIdLength) }),
  ]),
  'Which nodes: the ones named (in this order: the first are the canaries), every node, the nodes whose latest send has this spec digest, or the ids starting with a prefix. The stored rollout omits the named list (its targets say it)',
);

export const timeoutHeld = named(
  'TimeoutHeld',
  z.object({
    since: iso.describe('when the engine began to hold the timeout, on or after the deadline'),
    until: iso.nullable().describe('the earliest it decides; null: not until an engine observes again, then graceMs more'),
    reason: z
      .enum(['notObserving', 'grace'])
      .describe('notObserving: no report can reach the store; grace: observed again, the reports queued meanwhile still arriving'),
    graceMs: count.describe('how long after observing again the timeout waits (serve --grace-ms)'),
  }),
  'A timeout past due that the engine driving rollouts holds because no report can arrive (docs/design.md §8 "Timeouts while not observed")',
);

const timeoutHeldField = timeoutHeld
  .nullable()
  .optional()
  .describe('held past its deadline while no report can arrive; null: not held; absent when the engine answering does not drive rollouts');

export const waveCounts = named(
  'WaveCounts',
  z.object({
    wave: z.number().int().min(1),
    from: count.describe("the wave's nodes are the targets [from, to)"),
    to: count,
    size: count,
    startedAt: iso.nullable(),
    completedAt: iso.nullable(),
    recorded: z
      .object({ done: count, failed: count, superseded: count })
      .nullable()
      .describe('what the wave recorded when it completed (nodes behind at its timeout among the failures); null while open'),
    deadline: iso.nullable().describe('when pending nodes count as failures (timeout); null until every node of the wave was sent to'),
    unsent: count,
    pending: count.describe('sent, and its latest report does not name our digest yet (a stale report leaves it pending)'),
    done: count.describe('its latest report names the digest this rollout sent it, and it is converged'),
    refused: count,
    degraded: count,
    unsendable: count.describe('the spec assigns a port the node carries: never sent'),
    failed: count.describe('refused + degraded + unsendable'),
    superseded: count.describe('sent a newer declaration from elsewhere before reading ours'),
    skipped: count.describe('held or pinned when the wave was sent: not sent, no failure (docs/design.md §8 "Holds and pins")'),
    timeoutHeld: timeoutHeldField.describe(
      "the open wave's timeout held past its deadline while no report can arrive; null: not held; absent on other waves and when the engine answering does not drive rollouts",
    ),
  }),
  'How the nodes of one wave stand now',
);

export const rolloutSummary = named(
  'Rollout',
  z.object({
    rollout: z.string(),
    status: rolloutStatusEnum,
    specDigest: digest.describe("the spec's digest; under asOf, the empty spec's (each node is sent its own)"),
    asOf: z
      .object({ at: iso.nullable(), position: position.nullable() })
      .nullable()
      .describe('each target is sent the spec it had been sent at this time or store position; null: the one spec'),
    selection: rolloutSelection,
    targets: count,
    asGiven: z.object({ waves: z.string(), maxFailures: z.string(), abortOn: z.string().optional() }),
    maxFailures: count,
    criteria: z
      .array(
        z.object({
          asGiven: z.string(),
          classes: z.array(z.enum(failureReasons)).readonly(),
          count: count.nullable(),
          percent: z.number().nullable(),
          minSettled: count,
          failures: count,
          allowed: count.nullable().describe('failures it allows over the nodes settled now; null while fewer than minSettled settled'),
          settled: count,
        }),
      )
      .readonly()
      .describe('the abort criteria by failure class (a single budget is one criterion over every class) and how each stands now'),
    waveTimeoutMs: count,
    pauseMs: count,
    onSuperseded: z.enum(onSupersededPolicies).describe('what a superseded node means: fail (against the budget) or hold (its wave)'),
    startedBy: z.string(),
    startedAt: iso,
    updatedAt: iso,
    current: count.describe('the highest wave opened (0: none yet)'),
    waves: z.array(waveCounts).readonly(),
    totals: z.object({ unsent: count, pending: count, done: count, failed: count, superseded: count }),
    budget: z.object({ used: count, max: count }).describe('failures counted against the budget (completed waves + the open one now)'),
    convergence: z
      .object({ samples: count, p50Ms: z.number().nullable(), p99Ms: z.number().nullable() })
      .describe('send → matching report over the nodes this rollout completed'),
    eta: z
      .object({ remaining: count, ms: z.number().nullable(), at: iso.nullable() })
      .describe(
        'nodes not settled yet and the time to settle them at the rate so far, plus the pauses to come; null when unknown or ended',
      ),
    pausedAt: iso.nullable(),
    halted: z
      .object({
        wave: z.number().int(),
        at: iso,
        failures: count,
        maxFailures: count,
        failed: z.array(failure).readonly(),
        why: z.enum(['overBudget', 'noneDone']).describe('failures over the budget, or a wave settled with no node done'),
        criterion: z
          .object({ asGiven: z.string(), classes: z.array(z.enum(failureReasons)), failures: count, allowed: count, settled: count })
          .optional()
          .describe('the abort criterion that tripped (rollouts planned with abortOn)'),
      })
      .nullable(),
    completed: z.object({ at: iso, done: count, failed: count, superseded: count }).nullable(),
    aborted: z.object({ by: z.string(), reason: z.string(), at: iso }).nullable(),
    rollbackOnHalt: z.enum(rollbackPolicies).describe('what a halt rolls back: none, the halted wave, or every node sent'),
    gate: z
      .object({
        url: z.string(),
        timeoutMs: count,
        state: z.enum(['notAsked', 'open', 'held']),
        wave: count.optional(),
        detail: z.string().optional(),
        attempts: count.optional(),
        at: iso.optional(),
      })
      .nullable()
      .optional()
      .describe('the pre-wave gate and its latest answer: held until it answers 2xx for the next wave; null without one'),
    rollback: z
      .object({
        scope: z.enum(rollbackScopes),
        wave: count.describe('the wave rolled back for scope wave'),
        by: z.string().describe('the operator, or `engine` for rollbackOnHalt'),
        reason: z.string(),
        startedAt: iso,
        targets: count.describe('the nodes this rollout sent its spec to, in scope'),
        unsent: count,
        pending: count.describe('sent their previous spec, not reported its digest yet'),
        done: count.describe("reported the restored declaration's digest, converged"),
        failed: count,
        skipped: z
          .array(z.object({ node: z.string(), code: z.string(), reason: z.string() }))
          .readonly()
          .describe('not sent: `noPrevious` (its first declaration came from this rollout), `superseded`, or an error code'),
        skippedCount: count,
        failures: z.array(failure).readonly(),
        deadline: iso.nullable().describe('when the nodes still pending count as failed'),
        completedAt: iso.nullable(),
        timeoutHeld: timeoutHeldField,
      })
      .nullable()
      .describe('the rollback, once one began (docs/design.md §8, "Rollback")'),
    position: position.describe('store position of the last change: a rollout event or a change of one of its nodes'),
  }),
  'A rollout and how its waves stand now',
);

export const rolloutsQuery = z.object({
  status: rolloutStatusEnum.optional().describe('only rollouts in this status'),
  limit: z.coerce.number().int().min(1).max(1_000).default(100),
});

export const rolloutList = named(
  'RolloutList',
  z.object({ count: count, total: count, rollouts: z.array(rolloutSummary).readonly() }),
  'Rollouts, newest start first',
);

export const rolloutNodesQuery = z.object({
  wave: z.coerce.number().int().min(1).optional(),
  outcome: nodeOutcomeEnum.optional(),
  limit: z.coerce.number().int().min(1).max(5_000).default(500),
  after: z.coerce.number().int().min(0).optional().describe("pass the previous page's `next`"),
});

export const rolloutNode = named(
  'RolloutNode',
  z.object({
    node: z.string(),
    wave: z.number().int().min(1),
    outcome: nodeOutcomeEnum,
    serial: z.number().int().nullable(),
    digest: digest.nullable().describe('the digest this rollout sent the node'),
    sentAt: iso.nullable(),
    detail: z.string().nullable().describe('why it is not done, in words'),
  }),
);

export const rolloutNodes = named(
  'RolloutNodes',
  z.object({ rollout: z.string(), nodes: z.array(rolloutNode).readonly(), total: count, next: count.nullable() }),
  "A rollout's targets in wave order with how each stands",
);

export const rolloutStartBody = named(
  'RolloutStart',
  z
    .object({
      rollout: z.string().regex(rolloutIdPattern).optional().describe('the id (default: made from the time and 6 random hex digits)'),
      resources: z.array(resource).max(10_000).optional().describe('the spec to send every target (give this or asOf)'),
      asOf: z
        .string()
        .min(1)
        .max(64)
        .optional()
        .describe(
          'restore from history: a time (ISO 8601) or a store position (all digits); each target is sent the exact spec it had been sent then, a target sent nothing by then is skipped (noneAsOf). Give this or resources',
        ),
      selection: rolloutSelection,
      waves: z.string().min(1).max(200).describe('cumulative counts or percentages of the targets: `1,10%,50%,100%`'),
      maxFailures: z
        .string()
        .min(1)
        .max(20)
        .optional()
        .describe('`3` or `5%` of the targets: failures of any class beyond it halt the rollout (default `0`; not with `abortOn`)'),
      abortOn: z
        .string()
        .min(1)
        .max(500)
        .optional()
        .describe(
          'abort criteria by failure class, `refused+degraded:2,silent:10%@5`: a count, or a percentage of the nodes settled (rounded down) once `@n` have settled (not with `maxFailures`)',
        ),
      waveTimeoutMs: z.number().int().min(1).max(maxRolloutDurationMs).describe('at most 30 days (2592000000)'),
      pauseMs: z.number().int().min(0).max(maxRolloutDurationMs).optional().describe('at most 30 days (2592000000)'),
      onSuperseded: z
        .enum(onSupersededPolicies)
        .optional()
        .describe(
          "a node sent a newer declaration from elsewhere: 'fail' counts it against the budget (default), 'hold' keeps its wave open",
        ),
      rollbackOnHalt: z
        .enum(rollbackPolicies)
        .optional()
        .describe("on a halt, send the nodes sent this spec their previous one: 'none' (default), 'wave' (the halted wave's), 'all'"),
      rate: rolloutRate.optional().describe('metered sends: at most perMinute nodes a minute over the whole rollout'),
      ramp: rolloutRamp
        .optional()
        .describe('a rising meter: base a minute, times factor every everyMs, up to cap a minute (not with rate)'),
      gate: rolloutGate
        .optional()
        .describe('before each wave after the first, POST {rollout, wave, counts} to url: only a 2xx within timeoutMs opens the wave'),
    })
    .refine((b) => (b.resources === undefined) !== (b.asOf === undefined), 'give resources or asOf, exactly one'),
  'A spec to roll out (or a moment whose specs to restore), to which nodes, in which waves, with which failure budget',
);

export const rolloutStarted = named(
  'RolloutStarted',
  z.object({ rollout: z.string(), targets: count, waves: z.array(count).readonly().describe('cumulative node counts') }),
);

export const rollbackBody = named(
  'RollbackCommand',
  z.object({
    reason: z.string().max(1_000).optional().describe('why, for the record'),
    scope: z.enum(rollbackScopes).optional().describe("every node this rollout sent to ('all', default), or the open or halted wave's"),
  }),
);

export const rolloutCommandBody = named(
  'RolloutCommand',
  z.object({ reason: z.string().max(1_000).optional().describe('why, for the record (pause, abort)') }),
);
