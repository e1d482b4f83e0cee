import { z } from 'zod';

// A rollout is an event stream of its own, `rollout-<id>`, beside the node streams.
// Its events record what was planned and every decision the driver took, with the facts that
// depended on a clock (a wave's timeout, a failure seen) written into the event, so that folding
// the stream again gives the same rollout without a clock. The sends themselves are ordinary
// DeclarationSent events in the node streams, tagged with the rollout; RolloutSent lists them in
// the rollout stream too, appended in the same store call (docs/design.md, "Rollouts").

const iso = z.string().refine((s) => !Number.isNaN(Date.parse(s)), 'not an ISO 8601 time');
const digest = z.string().regex(/^[0-9a-f]{64}$/);
const count = z.number().int().min(0);

/**
 * A rollout id becomes a stream name (`rollout-<id>`) and a URL segment, so it takes the node
 * ids' conservative charset (src/core/wire/nodeId.ts).
 */
export const rolloutIdPattern = /^[a-z0-9][a-z0-9._-]{0,62}$/;
const rolloutId = z.string().regex(rolloutIdPattern);

/**
 * The longest wave timeout or pause a plan may ask for. A deadline is a time the read side prints
 * (`new Date(ms).toISOString()`): one past the Date range made every read of rollouts throw. The
 * plans (API, CLI) are refused past it; stored events are not, so a store that holds one still reads.
 */
export const maxRolloutDurationMs = 30 * 24 * 60 * 60 * 1000;

/** How the targets were chosen; the chosen nodes themselves are in RolloutNodesListed. */
export const rolloutSelection = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('nodes') }),
  z.object({ kind: z.literal('all') }),
  z.object({ kind: z.literal('spec'), specDigest: digest }),
  z.object({ kind: z.literal('prefix'), prefix: z.string().min(1) }),
]);

/**
 * Why a node failed in its wave, its failure class: 'timeout', still behind when the wave timed out
 * while connected; 'silent', still behind then and disconnected (no sign of life within the
 * liveness grace, docs/design.md §3); 'superseded' only under onSuperseded 'fail'. Which classes
 * spend the budget is the plan's abort criteria (src/core/rollout/criteria.ts).
 */
export const failureReasons = ['refused', 'degraded', 'timeout', 'silent', 'unsendable', 'superseded'] as const;
export type FailureReason = (typeof failureReasons)[number];

/**
 * One abort criterion: the failures of its classes over the whole rollout, against a count or a
 * percentage of the nodes settled so far (rounded down), which trips only once `minSettled` nodes
 * have settled. The rollout halts when the failures of any criterion exceed what it allows.
 */
export const abortCriterion = z
  .object({
    classes: z.array(z.enum(failureReasons)).min(1),
    count: count.optional(),
    percent: z.number().min(0).max(100).optional(),
    minSettled: count,
    /** As the operator wrote it: `refused+degraded:5%@10`. */
    asGiven: z.string(),
  })
  .refine((c) => (c.count === undefined) !== (c.percent === undefined), 'a criterion has a count or a percentage, not both');
export type AbortCriterion = z.infer<typeof abortCriterion>;

/** Failures per class, as a wave recorded them. */
const byClass = z.partialRecord(z.enum(failureReasons), count);

const failure = z.object({ node: z.string().min(1), reason: z.enum(failureReasons), detail: z.string() });

export const onSupersededPolicies = ['fail', 'hold'] as const;
export type OnSuperseded = (typeof onSupersededPolicies)[number];

/** What a halt does to the nodes sent: nothing, roll back the halted wave's, or every node's (docs/design.md §8, "Rollback"). */
export const rollbackPolicies = ['none', 'wave', 'all'] as const;
export type RollbackOnHalt = (typeof rollbackPolicies)[number];
export const rollbackScopes = ['wave', 'all'] as const;
export type RollbackScope = (typeof rollbackScopes)[number];

export const rolloutGate = z.object({ url: z.url({ protocol: /^https?$/ }), timeoutMs: z.number().int().min(1).max(300_000) });
export type RolloutGate = z.infer<typeof rolloutGate>;
export const rolloutRate = z.object({ perMinute: z.number().positive().max(1_000_000) });
export const rolloutRamp = z
  .object({
    base: z.number().positive().max(1_000_000),
    factor: z.number().min(1).max(1_000),
    cap: z.number().positive().max(1_000_000),
    everyMs: z.number().int().min(1_000).max(maxRolloutDurationMs),
  })
  .refine((r) => r.cap >= r.base, 'the cap is at least the base');

const position = z.string().regex(/^\d{1,20}$/);

/**
 * A rollout as of a moment (docs/design.md §8, "A rollout as of a moment"): each target is sent the
 * exact spec it had been sent at a time (`at`) or a store position (`position`), not one spec for
 * all. `upTo` is the store's head when it started: sends stored after it are not history, so every
 * read of a node's spec then gives the same answer however late the driver comes to it.
 */
export const rolloutAsOf = z
  .object({ at: iso.optional(), position: position.optional(), upTo: position })
  .refine((a) => (a.at === undefined) !== (a.position === undefined), 'as of a time or a position, exactly one');
export type RolloutAsOf = z.infer<typeof rolloutAsOf>;

export const rolloutStartedData = z.object({
  rollout: rolloutId,
  /**
   * The spec sent to every target, as given (each node's declaration wraps it with its own node,
   * serial, time). Empty under `asOf`, whose spec is each node's own; `specDigest` is then the empty spec's.
   */
  resources: z.array(z.looseObject({ id: z.string().min(1) })),
  specDigest: digest,
  selection: rolloutSelection,
  /** How many nodes were selected; their ids follow in RolloutNodesListed events, in wave order. */
  targets: z.number().int().min(1),
  /** Cumulative node counts at the end of each wave, strictly increasing; the last is `targets`. */
  waves: z.array(z.number().int().min(1)).min(1),
  /** The plan as the operator wrote it, for people: `1,10%,50%,100%`, `5%`. */
  asGiven: z.object({ waves: z.string(), maxFailures: z.string(), abortOn: z.string().optional() }),
  /**
   * The failure budget resolved to a count: the rollout halts when failures exceed it. With
   * `criteria` it is not read (the targets' count is recorded, which failures never exceed).
   */
  maxFailures: count,
  /**
   * The abort criteria by failure class. Absent in rollouts planned with a single budget (and in
   * every rollout recorded before criteria existed): one criterion, every class against maxFailures.
   */
  criteria: z.array(abortCriterion).min(1).optional(),
  waveTimeoutMs: z.number().int().min(1),
  /** Wait between a wave's completion and the next wave's start. */
  pauseMs: count,
  /**
   * What a node superseded from elsewhere (sent a newer declaration before it read ours) means:
   * 'fail' counts it against the budget, 'hold' keeps its wave open until the operator acts.
   * Absent in rollouts recorded before the choice existed: they take the default, 'fail'
   * (supersededPolicy, projections/rollout.ts), as a superseded node proves nothing either way.
   */
  onSuperseded: z.enum(onSupersededPolicies).optional(),
  /** What a halt rolls back. Absent in rollouts recorded before rollback existed: 'none'. */
  rollbackOnHalt: z.enum(rollbackPolicies).optional(),
  /**
   * A pre-wave gate (docs/design.md §8 "Gates"): before each wave after the first the driver POSTs
   * to `url`, and only a 2xx within `timeoutMs` opens the wave. Absent: no gate.
   */
  gate: rolloutGate.optional(),
  /** Metered sends (docs/design.md §8 "Rate"): at most `perMinute` nodes a minute, over the whole rollout. */
  rate: rolloutRate.optional(),
  /** A rising meter: `base` a minute, times `factor` every `everyMs`, up to `cap` a minute (not with `rate`). */
  ramp: rolloutRamp.optional(),
  /** Each target's spec as of a moment instead of `resources`. Absent: the one spec. */
  asOf: rolloutAsOf.optional(),
  startedBy: z.string(),
  startedAt: iso,
});

export const rolloutNodesListedData = z.object({
  rollout: rolloutId,
  /** Index of the first node of this list among the targets (lists are appended in order). */
  from: count,
  nodes: z.array(z.string().min(1)).min(1),
  listedAt: iso,
});

export const waveStartedData = z.object({
  rollout: rolloutId,
  wave: z.number().int().min(1),
  /** The wave's nodes are targets[from, to). */
  from: count,
  to: count,
  startedAt: iso,
});

export const rolloutSentData = z.object({
  rollout: rolloutId,
  wave: z.number().int().min(1),
  /**
   * Declarations recorded in the same store call, one per node; under `asOf`, `restores` names the
   * node's send whose spec it carries again (absent otherwise).
   */
  sends: z.array(
    z.object({
      node: z.string().min(1),
      serial: z.number().int().min(1),
      digest,
      restores: z.object({ serial: z.number().int().min(1), digest, specDigest: digest }).optional(),
    }),
  ),
  /**
   * Nodes not sent to: a carried port (the error's code and message), held or pinned, or under
   * `asOf` sent nothing by then (`noneAsOf`).
   */
  skipped: z.array(z.object({ node: z.string().min(1), code: z.string(), reason: z.string() })),
  sentAt: iso,
});

export const waveCompletedData = z.object({
  rollout: rolloutId,
  wave: z.number().int().min(1),
  completedAt: iso,
  done: count,
  failed: count,
  superseded: count,
  /** The wave's failures (the first `listLimit`; `failed` counts them all). */
  failures: z.array(failure),
  /** Nodes sent a newer declaration from elsewhere before reading ours (the first `listLimit`). */
  supersededNodes: z.array(z.string()),
  /** `failed` by failure class (superseded nodes are `superseded`). Absent in older events. */
  byClass: byClass.optional(),
  /** Nodes not sent to, held or pinned (docs/design.md §8 "Holds and pins"): neither done nor failed. Absent: none. */
  skipped: count.optional(),
});

export const rolloutPausedData = z.object({ rollout: rolloutId, by: z.string(), reason: z.string(), at: iso });
export const rolloutResumedData = z.object({ rollout: rolloutId, by: z.string(), at: iso });
export const rolloutAbortedData = z.object({ rollout: rolloutId, by: z.string(), reason: z.string(), at: iso });

export const rolloutHaltedData = z.object({
  rollout: rolloutId,
  wave: z.number().int().min(1),
  at: iso,
  /** Failures counted over the whole rollout when it halted, and the budget they exceeded. */
  failures: count,
  maxFailures: count,
  /** The open wave's failures at that moment (the first `listLimit`). */
  failed: z.array(failure),
  /**
   * Why it halted: 'overBudget', failures exceeded maxFailures; 'noneDone', the wave's nodes all
   * settled with none done, so nothing proved the spec works. Absent in older events: 'overBudget'.
   */
  why: z.enum(['overBudget', 'noneDone']).optional(),
  /**
   * The abort criterion that tripped (why 'overBudget' under criteria): its failures, what it
   * allowed and the nodes settled it was judged on. Absent for a single budget and in older events.
   */
  criterion: z
    .object({ asGiven: z.string(), classes: z.array(z.enum(failureReasons)), failures: count, allowed: count, settled: count })
    .optional(),
});

export const rolloutCompletedData = z.object({ rollout: rolloutId, at: iso, done: count, failed: count, superseded: count });

/**
 * A rollback begins: the nodes this rollout sent to (those of `wave` for scope 'wave') are each
 * sent the declaration they had before it. It ends the rollout's waves: nothing more of its spec
 * is sent. `by` is the operator, or `engine` for the plan's rollbackOnHalt.
 */
export const rollbackStartedData = z.object({
  rollout: rolloutId,
  scope: z.enum(rollbackScopes),
  /** The wave rolled back for scope 'wave' (the one open, or last opened, when it began); 0: none was. */
  wave: count,
  by: z.string(),
  reason: z.string(),
  at: iso,
});

/**
 * Rollback declarations recorded in the same store call, each restoring the exact resources of the
 * node's send before this rollout's (`restores`), and the nodes not sent one: `noPrevious` (this
 * rollout's send was its first), `superseded` (a newer declaration reached it from elsewhere), or
 * the error's code when the restored spec cannot be sent.
 */
export const rollbackSentData = z.object({
  rollout: rolloutId,
  sends: z.array(
    z.object({
      node: z.string().min(1),
      serial: z.number().int().min(1),
      digest,
      restores: z.object({ serial: z.number().int().min(1), digest, specDigest: digest }),
    }),
  ),
  skipped: z.array(z.object({ node: z.string().min(1), code: z.string(), reason: z.string() })),
  sentAt: iso,
});

/** Every node sent a rollback settled (or its timeout passed): counts, and the failures (the first `listLimit`). */
export const rollbackCompletedData = z.object({
  rollout: rolloutId,
  at: iso,
  done: count,
  failed: count,
  skipped: count,
  failures: z.array(failure),
});

/**
 * A gate's answer before wave `wave` opens: `passed` (a 2xx) opens it; otherwise the wave is held
 * and the driver asks again later. `status`: the HTTP status (null: no answer, `detail` says why).
 */
export const waveGateCheckedData = z.object({
  rollout: rolloutId,
  wave: z.number().int().min(2),
  passed: z.boolean(),
  status: z.number().int().nullable(),
  detail: z.string(),
  /** The how-manieth call for this wave (1 first). */
  attempt: z.number().int().min(1),
  at: iso,
});

/** Lists of nodes inside one event stop here, so an event stays far below the store's size limit. */
export const listLimit = 1_000;

export type RolloutSelection = z.infer<typeof rolloutSelection>;
export type RolloutFailure = z.infer<typeof failure>;
export type RolloutStartedData = Readonly<z.infer<typeof rolloutStartedData>>;
export type RolloutNodesListedData = Readonly<z.infer<typeof rolloutNodesListedData>>;
export type WaveStartedData = Readonly<z.infer<typeof waveStartedData>>;
export type RolloutSentData = Readonly<z.infer<typeof rolloutSentData>>;
export type WaveCompletedData = Readonly<z.infer<typeof waveCompletedData>>;
export type RolloutPausedData = Readonly<z.infer<typeof rolloutPausedData>>;
export type RolloutResumedData = Readonly<z.infer<typeof rolloutResumedData>>;
export type RolloutAbortedData = Readonly<z.infer<typeof rolloutAbortedData>>;
export type RolloutHaltedData = Readonly<z.infer<typeof rolloutHaltedData>>;
export type RolloutCompletedData = Readonly<z.infer<typeof rolloutCompletedData>>;
export type RollbackStartedData = Readonly<z.infer<typeof rollbackStartedData>>;
export type RollbackSentData = Readonly<z.infer<typeof rollbackSentData>>;
export type RollbackCompletedData = Readonly<z.infer<typeof rollbackCompletedData>>;
export type WaveGateCheckedData = Readonly<z.infer<typeof waveGateCheckedData>>;

export const rolloutEventDataSchemas = {
  RolloutStarted: rolloutStartedData,
  RolloutNodesListed: rolloutNodesListedData,
  WaveStarted: waveStartedData,
  RolloutSent: rolloutSentData,
  WaveCompleted: waveCompletedData,
  RolloutPaused: rolloutPausedData,
  RolloutResumed: rolloutResumedData,
  RolloutHalted: rolloutHaltedData,
  RolloutCompleted: rolloutCompletedData,
  RolloutAborted: rolloutAbortedData,
  RollbackStarted: rollbackStartedData,
  RollbackSent: rollbackSentData,
  RollbackCompleted: rollbackCompletedData,
  WaveGateChecked: waveGateCheckedData,
} as const;

type Ev<Type extends string, Data> = Readonly<{ type: Type; data: Data }>;
export type RolloutStarted = Ev<'RolloutStarted', RolloutStartedData>;
export type RolloutNodesListed = Ev<'RolloutNodesListed', RolloutNodesListedData>;
export type WaveStarted = Ev<'WaveStarted', WaveStartedData>;
export type RolloutSent = Ev<'RolloutSent', RolloutSentData>;
export type WaveCompleted = Ev<'WaveCompleted', WaveCompletedData>;
export type RolloutPaused = Ev<'RolloutPaused', RolloutPausedData>;
export type RolloutResumed = Ev<'RolloutResumed', RolloutResumedData>;
export type RolloutHalted = Ev<'RolloutHalted', RolloutHaltedData>;
export type RolloutCompleted = Ev<'RolloutCompleted', RolloutCompletedData>;
export type RolloutAborted = Ev<'RolloutAborted', RolloutAbortedData>;
export type RollbackStarted = Ev<'RollbackStarted', RollbackStartedData>;
export type RollbackSent = Ev<'RollbackSent', RollbackSentData>;
export type RollbackCompleted = Ev<'RollbackCompleted', RollbackCompletedData>;
export type WaveGateChecked = Ev<'WaveGateChecked', WaveGateCheckedData>;
export type RolloutEvent =
  | RolloutStarted
  | RolloutNodesListed
  | WaveStarted
  | RolloutSent
  | WaveCompleted
  | RolloutPaused
  | RolloutResumed
  | RolloutHalted
  | RolloutCompleted
  | RolloutAborted
  | RollbackStarted
  | RollbackSent
  | RollbackCompleted
  | WaveGateChecked;
export type RolloutEventType = RolloutEvent['type'];

export const rolloutEventTypes = [
  'RolloutStarted',
  'RolloutNodesListed',
  'WaveStarted',
  'RolloutSent',
  'WaveCompleted',
  'RolloutPaused',
  'RolloutResumed',
  'RolloutHalted',
  'RolloutCompleted',
  'RolloutAborted',
  'RollbackStarted',
  'RollbackSent',
  'RollbackCompleted',
  'WaveGateChecked',
] as const satisfies readonly RolloutEventType[];

export const rolloutStreamPrefix = 'rollout-';
export const rolloutStreamOf = (rollout: string): string => `${rolloutStreamPrefix}${rollout}`;
export const rolloutOfStream = (stream: string): string | null =>
  stream.startsWith(rolloutStreamPrefix) ? stream.slice(rolloutStreamPrefix.length) : null;
