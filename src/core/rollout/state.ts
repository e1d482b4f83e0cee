import type {
  FailureReason,
  OnSuperseded,
  RollbackOnHalt,
  RolloutAbortedData,
  RolloutCompletedData,
  RollbackCompletedData,
  RollbackStartedData,
  RolloutHaltedData,
  RolloutStartedData,
  WaveCompletedData,
} from '../events/index.ts';

// A rollout's state as its fold (projections/rollout.ts) makes it from the rollout's own stream:
// the plan, the waves, what was sent to whom, and how it ended. The decision (decide.ts) and the
// read side take it as it is; nothing here depends on a clock.

/**
 * 'rollingBack' from RollbackStarted until RollbackCompleted ('rolledBack'): a rollback ends the
 * waves whatever the rollout's status was, so only the rollback's own steps remain.
 */
export const rolloutStatuses = ['running', 'paused', 'halted', 'completed', 'aborted', 'rollingBack', 'rolledBack'] as const;
export type RolloutStatus = (typeof rolloutStatuses)[number];
export const isTerminal = (s: RolloutStatus): boolean => s === 'halted' || s === 'completed' || s === 'aborted' || s === 'rolledBack';

export type WaveState = Readonly<{
  wave: number;
  /** Its nodes are the rollout's targets[from, to). */
  from: number;
  to: number;
  startedAt: string | null;
  /** When its last send was recorded (ms): its timeout runs from there. */
  lastSentAtMs: number | null;
  /** Time the rollout spent paused since the wave's last send: the timeout waits that much longer. */
  pausedMs: number;
  completed: WaveCompletedData | null;
}>;

export type RolloutSend = Readonly<{ wave: number; serial: number; digest: string; sentAt: string }>;
export type RolloutSkip = Readonly<{ wave: number; code: string; reason: string }>;

/** A rollback's send: the node's previous declaration again, as a new one (serial, digest). */
export type RollbackSend = Readonly<{
  /** The wave that sent the node this rollout's spec. */
  wave: number;
  serial: number;
  digest: string;
  sentAt: string;
  /** The send before this rollout's whose resources it restores. */
  restores: Readonly<{ serial: number; digest: string; specDigest: string }>;
}>;

export type RollbackState = Readonly<{
  started: RollbackStartedData;
  sends: ReadonlyMap<string, RollbackSend>;
  /** Nodes not sent a rollback: `noPrevious`, `superseded`, or the error that refused the restored spec. */
  skipped: ReadonlyMap<string, Readonly<{ code: string; reason: string }>>;
  /** When its last send was recorded (ms): its timeout (the plan's wave timeout) runs from there. */
  lastSentAtMs: number | null;
  completed: RollbackCompletedData | null;
}>;

/** The latest gate answer (docs/design.md §8 "Gates"): for which wave, whether it opened it, and why not. */
export type GateState = Readonly<{ wave: number; passed: boolean; status: number | null; detail: string; attempts: number; at: string }>;

export type RolloutState = Readonly<{
  id: string;
  started: RolloutStartedData;
  /** The selected nodes in wave order, as listed after RolloutStarted. */
  targets: readonly string[];
  status: RolloutStatus;
  waves: readonly WaveState[];
  /** The highest wave opened (0: none yet). */
  current: number;
  /** What this rollout sent each node, from RolloutSent. */
  sends: ReadonlyMap<string, RolloutSend>;
  /** Nodes it could not send to (a carried port), from RolloutSent. */
  skipped: ReadonlyMap<string, RolloutSkip>;
  /** Totals over the completed waves. */
  done: number;
  failed: number;
  superseded: number;
  /** `failed` by failure class, for the waves that recorded it (WaveCompleted.byClass)... */
  failedByClass: Readonly<Partial<Record<FailureReason, number>>>;
  /** ...and the failures of the waves recorded before classes were counted. */
  unclassified: number;
  pausedAt: string | null;
  halted: RolloutHaltedData | null;
  completed: RolloutCompletedData | null;
  aborted: RolloutAbortedData | null;
  /** The rollback, once one started (RollbackStarted); null before. */
  rollback: RollbackState | null;
  /** The gate's latest answer (WaveGateChecked); null before any, and for a plan without a gate. */
  gate: GateState | null;
  /** Time of the last event folded. */
  updatedAt: string;
  /** Revision of the last event folded in the rollout's stream: the expected revision of the next decision. */
  revision: bigint;
  position: bigint;
}>;

// A rollout's collections grow by appending (targets, sends) or change one entry per event
// (waves), so a fold that copied them per event was quadratic in the plan. The states of one line
// of folds share them instead, and each state records how far it reaches: the latest state reads

export const targetsComplete = (s: RolloutState): boolean => s.targets.length >= s.started.targets;

/** When an open wave times out (ms), or null while it still has nodes to send to. */
export const waveDeadline = (s: RolloutState, w: WaveState): number | null =>
  w.lastSentAtMs === null ? null : w.lastSentAtMs + s.started.waveTimeoutMs + w.pausedMs;

/**
 * What the rollout's rule reads of a node, shaped as the node fold's state (projections/) answers
 * it: the core sits below the folds, so it names the fields it needs instead of importing them.
 */
export type NodeFacts = Readonly<{
  node: string;
  sent: Readonly<{ digest: string; specDigest: string; serial: number }> | null;
  status: string;
  /** The last sign of life (a report or an alive), for whether a node still behind at its wave's timeout was silent. */
  lastSeenAt: string | null;
  /**
   * Whether the node is heard now, where its latest recorded transition says (docs/design.md §3
   * "Liveness as recorded"): a reader without the ingest's exact time sets it. Absent, `lastSeenAt`
   * and the grace decide.
   */
  connected?: boolean;
  reported: Readonly<{ declared: string | null; failed: Readonly<Record<string, string>>; refused: string; class: string }> | null;
  missing: readonly string[];
}>;

/** A rollout's policy on halt: recorded in its plan, 'none' when the plan predates rollback. */
export const rollbackPolicy = (s: Pick<RolloutState, 'started'>): RollbackOnHalt => s.started.rollbackOnHalt ?? 'none';

/** A rollout's superseded policy: recorded in its plan, 'fail' when the plan predates the choice. */
export const supersededPolicy = (s: Pick<RolloutState, 'started'>): OnSuperseded => s.started.onSuperseded ?? 'fail';
