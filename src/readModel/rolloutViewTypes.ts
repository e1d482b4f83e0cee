import type { NodeState } from '../../projections/index.ts';
import type { LatencyHistogram } from '../../projections/index.ts';
import type { NodeFacts, NodeOutcome, RolloutSend, RolloutSkip, RolloutState, RolloutStatus, WaveProgress } from '../core/rollout/index.ts';
import type { OnSuperseded, RollbackOnHalt, RollbackScope, RolloutFailure } from '../core/events/index.ts';
import type { EventStore } from '../store/index.ts';
import type { CriterionNow } from './rolloutCriteria.ts';

// The shapes of the live rollout view (rollouts.ts): what it answers (summaries, node pages,
// changes) and what it keeps per rollout and per node, which its queries (rolloutSummary.ts,
// rolloutNodes.ts, rolloutProgress.ts) read.

/** Per wave: how its nodes stand now. `failed` = refused + degraded + unsendable; a timeout is judged by the deadline. */
export type WaveCounts = Readonly<{
  wave: number;
  from: number;
  to: number;
  size: number;
  startedAt: string | null;
  completedAt: string | null;
  /** What WaveCompleted recorded when the wave completed (its timeouts among the failures); null while open. */
  recorded: Readonly<{ done: number; failed: number; superseded: number }> | null;
  /** When the wave's timeout turns its pending nodes into failures (null: not all sent yet, or completed). */
  deadline: string | null;
  unsent: number;
  pending: number;
  done: number;
  refused: number;
  degraded: number;
  unsendable: number;
  failed: number;
  superseded: number;
  /** Held or pinned when the wave was sent: not sent, no failure (docs/design.md §8 "Holds and pins"). */
  skipped: number;
  /** The open wave's timeout held by the engine answering, which drives rollouts; absent where that is not known. */
  timeoutHeld?: TimeoutHeld | null;
}>;

/**
 * A timeout past due that the rollout driver holds while no report can arrive (docs/design.md §8
 * "Timeouts while not observed"): since when it holds it, and the earliest it decides (null: not
 * until an engine observes again, then `graceMs` more). Known only to the engine driving.
 */
export type TimeoutHeld = Readonly<{ since: string; until: string | null; reason: 'notObserving' | 'grace'; graceMs: number }>;

export type RolloutSummary = Readonly<{
  rollout: string;
  status: RolloutStatus;
  specDigest: string;
  /** Each target's spec as of this time or store position instead of one spec (docs/design.md §8); null: one spec. */
  asOf: Readonly<{ at: string | null; position: string | null }> | null;
  selection: RolloutState['started']['selection'];
  targets: number;
  asGiven: RolloutState['started']['asGiven'];
  maxFailures: number;
  /** The abort criteria (a single budget is one over every class) and how each stands now. */
  criteria: readonly CriterionNow[];
  waveTimeoutMs: number;
  pauseMs: number;
  onSuperseded: OnSuperseded;
  startedBy: string;
  startedAt: string;
  updatedAt: string;
  /** The highest wave opened (0: none yet). */
  current: number;
  waves: readonly WaveCounts[];
  /** Over every wave, now. */
  totals: Readonly<{ unsent: number; pending: number; done: number; failed: number; superseded: number }>;
  /** Failures counted against the budget: those the completed waves recorded, and the open wave's now. */
  budget: Readonly<{ used: number; max: number }>;
  /** Send → matching report over the nodes this rollout completed (nearest rank, as the fleet's). */
  convergence: Readonly<{ samples: number; p50Ms: number | null; p99Ms: number | null }>;
  /**
   * A running rollout's estimated time to reach every target: the nodes not yet settled at the rate
   * nodes have settled since the first send, plus the pauses still to come. Null before any node
   * settled and once the rollout ended.
   */
  eta: Readonly<{ remaining: number; ms: number | null; at: string | null }>;
  pausedAt: string | null;
  halted: (NonNullable<RolloutState['halted']> & Readonly<{ why: 'overBudget' | 'noneDone' }>) | null;
  completed: RolloutState['completed'];
  aborted: RolloutState['aborted'];
  /** What a halt rolls back (docs/design.md §8, "Rollback"). */
  rollbackOnHalt: RollbackOnHalt;
  /** The plan's gate and its latest answer; null without one. */
  gate: Readonly<{
    url: string;
    timeoutMs: number;
    state: 'notAsked' | 'open' | 'held';
    wave?: number;
    detail?: string;
    attempts?: number;
    at?: string;
  }> | null;
  rollback: RollbackSummary | null;
  /** Store position of the last change: a rollout event, or a change of one of its nodes' outcomes. */
  position: string;
}>;

/** A rollback as it stands: its targets (the nodes it covers) counted by how they stand on their restored declarations. */
export type RollbackSummary = Readonly<{
  scope: RollbackScope;
  wave: number;
  by: string;
  reason: string;
  startedAt: string;
  targets: number;
  unsent: number;
  pending: number;
  /** Reported the restored declaration's digest, converged. */
  done: number;
  failed: number;
  /** Listed and not sent (the first 1,000): previous spec unknown (`noPrevious`), `superseded`, or an error's code. */
  skipped: readonly Readonly<{ node: string; code: string; reason: string }>[];
  skippedCount: number;
  /** Refused, degraded or superseded on the restored declaration now, or as its end recorded them (timeouts among them). */
  failures: readonly RolloutFailure[];
  /** When its nodes still behind count as failed (null: nothing sent yet, or ended). */
  deadline: string | null;
  completedAt: string | null;
  /** Its timeout held, as a wave's (`WaveCounts.timeoutHeld`). */
  timeoutHeld?: TimeoutHeld | null;
}>;

/** One target as it stands in the rollout. */
export type RolloutNode = Readonly<{
  node: string;
  wave: number;
  outcome: NodeOutcome;
  /** What this rollout sent it (null: not sent, or unsendable). */
  serial: number | null;
  digest: string | null;
  sentAt: string | null;
  /** Why it is not done, in words (null when done). */
  detail: string | null;
}>;

export type RolloutNodesQuery = Readonly<{ wave?: number; outcome?: NodeOutcome; limit: number; after?: number }>;
export type RolloutNodesPage = Readonly<{ rollout: string; nodes: readonly RolloutNode[]; total: number; next: number | null }>;

export type RolloutChange = Readonly<{ rollout: string; position: bigint }>;
export type RolloutChangeListener = (change: RolloutChange) => void;

export type RolloutView = Readonly<{
  get: (id: string) => RolloutState | undefined;
  /** Every rollout, newest start first. */
  list: () => readonly RolloutState[];
  summary: (id: string, now: number) => RolloutSummary | undefined;
  /** Targets with their outcomes, in wave order; `after` is the index in the targets to start after. */
  nodes: (id: string, query: RolloutNodesQuery) => RolloutNodesPage | undefined;
  /**
   * How the open wave's nodes stand, for the driver's decision: counts kept as events fold, lists
   * built from the wave's targets when first read. Equal to projections' waveProgress.
   */
  progress: (id: string, limit?: number) => WaveProgress | null;
  /**
   * A node as the rollouts judge it: its folded state with the ingest's exact last-seen time, if
   * newer; without one, with whether its latest recorded transition says it is heard (`connected`).
   */
  nodeOf: (node: string) => RolloutNodeState | undefined;
  /** `progress` of `s`'s rollout when this view has folded its stream to `s.revision`, as the driver did; else undefined. */
  progressAt: (s: RolloutState, limit?: number) => WaveProgress | null | undefined;
  /**
   * `progress` as this view has folded the rollout so far, whatever the driver read since: the
   * revision and open wave it folded to, and whether it tracks a node (listed by a RolloutSent it
   * folded). The driver adds the sends it recorded since (src/engine/rolloutProgressAhead.ts).
   */
  progressFolded: (id: string, limit?: number) => ProgressFolded | undefined;
  onChange: (listener: RolloutChangeListener) => () => void;
  /** Fold the rollout streams up to `upTo` (after a snapshot restore: the read model skipped them). */
  load: (store: EventStore, upTo: bigint | null) => Promise<void>;
  /** Rollouts tracked, and nodes sent to by one (for tests and the bench). */
  size: () => Readonly<{ rollouts: number; sends: number }>;
  stop: () => void;
}>;

export type ProgressFolded = Readonly<{
  revision: bigint;
  current: number;
  progress: WaveProgress | null;
  tracks: (node: string) => boolean;
}>;

/** A node this rollout sent to (or could not), with its outcome as last counted. */
export type Entry = {
  readonly r: Tracked;
  readonly wave: number;
  readonly send: RolloutSend | undefined;
  readonly skip: RolloutSkip | undefined;
  outcome: NodeOutcome;
  /** Its latency is in the histogram (counted once, when it was first done). */
  measured: boolean;
  /** The node's report count when last looked at: a new report changes why a pending node is not done. */
  reports: number;
};

export type Counts = {
  pending: number;
  done: number;
  refused: number;
  degraded: number;
  unsendable: number;
  superseded: number;
  /** Held or pinned when its wave was sent: not sent, neither done nor failed. */
  skipped: number;
};
export const zero = (): Counts => ({ pending: 0, done: 0, refused: 0, degraded: 0, unsendable: 0, superseded: 0, skipped: 0 });

export type Tracked = {
  state: RolloutState;
  /** Index by wave number − 1. */
  counts: Counts[];
  latencies: LatencyHistogram;
  firstSentMs: number | null;
  position: bigint;
};

export const countable = (o: NodeOutcome): o is keyof Counts => o !== 'unsent';

/** What the queries read of the view: a node's entry in a rollout, and the node fold's state. */
export type Lookup = Readonly<{
  entryOf: (r: Tracked, node: string) => Entry | undefined;
  nodeOf: (node: string) => RolloutNodeState | undefined;
}>;

/** A node's folded state as the rollouts read it (RolloutView.nodeOf). */
export type RolloutNodeState = NodeState & Pick<NodeFacts, 'connected'>;
