import type { Logger } from 'pino';
import type { NodeState } from '../../projections/index.ts';
import type { Decision, RolloutState, WaveProgress } from '../core/rollout/index.ts';
import type { SigningKey } from '../core/declaration/index.ts';
import type { Metrics } from '../metrics.ts';
import type { EventStore } from '../store/port.ts';
import type { GateKeeperOptions } from './rolloutGate.ts';
import type { LoadNode } from './sendView.ts';
import type { ProgressFolded } from './rolloutProgressAhead.ts';
import type { SignPool } from './signPool.ts';

// What the rollout driver (rolloutDriver.ts) is given: the store and key it sends with, the read
// side it decides on, its clocks, and how often it looks again.

export type RolloutDriverOptions = Readonly<{
  store: EventStore;
  key: SigningKey;
  logger: Logger;
  /** Node states as the read model folds them. */
  nodeOf: (node: string) => NodeState | undefined;
  /** The read model's position, so a timeout is judged only on what the store held (null: nothing folded). */
  readModelPosition?: () => bigint | null;
  /** Hear that a node's state changed, to decide again at once (the read model's onChange). */
  onNodeChange?: (listener: (node: string) => void) => () => void;
  /**
   * How a wave's nodes stand as a view kept up to date as events fold counts them (the read side's,
   * src/readModel/rollouts.ts `progressAt`), so a round costs no walk over the wave; undefined when
   * that view has not folded the rollout as far as `s`. Then, and without it, computed over the
   * wave from `nodeOf` (projections/rollout.ts).
   */
  progress?: (s: RolloutState, wave: number) => WaveProgress | null | undefined;
  /**
   * The same view's progress as folded so far, when it has not folded the rollout to `s` yet: the
   * driver adds the sends it read since (rolloutProgressAhead.ts) rather than count the wave.
   */
  progressFolded?: (rollout: string) => ProgressFolded | undefined;
  /** Node revisions, carried ports and latest serials for sends; default: from `nodeOf`, the store when that lags. */
  loadNode?: LoadNode;
  /** The wall clock: the times recorded in events. */
  now?: () => Date;
  /** A monotonic clock (ms; default performance.now): how long the driver waits, timeouts and pauses included. */
  monotonic?: () => number;
  /**
   * The liveness grace (serve --grace-ms): a node still behind at its wave's timeout and silent
   * longer is 'silent'; and how long after observing again a timeout waits for queued reports.
   */
  graceMs?: number;
  /**
   * Since when, on `monotonic`'s clock, the nodes' reports have been able to reach the store
   * without a break (this engine's ingest consuming; without ingest, an engine observing as the
   * record says); null while they cannot. No wave's timeout is decided while null, nor within a
   * grace after it (docs/design.md §8 "Timeouts while not observed"). Absent: always, none held.
   */
  observedSince?: () => number | null;
  metrics?: Metrics;
  /**
   * Where the waves' declarations are signed, the next batch while the current one is appended:
   * by default a thread of their own (signPool.ts), started at the first send and stopped with the
   * driver; a pool given here is used and stopped so too; null signs them on the engine's thread.
   */
  signPool?: SignPool | null;
  /** Nodes sent per append call (and per RolloutSent), at most listLimit. */
  batchSize?: number;
  /**
   * Events per read of a rollout's stream (default 8), a turn of the loop between reads: the first
   * read of a large rollout is its lists of targets, too many to decode and fold in one turn.
   */
  readPage?: number;
  /** Decide again at least this often while a rollout is running (ms). */
  pollMs?: number;
  /** At least this long between two rounds of decisions, so a flood of node changes is coalesced (ms). */
  minIntervalMs?: number;
  /**
   * With no rollout running, save how far the driver followed at most this often (ms; default
   * 5 s), and when it stops. The checkpoint only shortens a restart's search for rollouts, and
   * saving it every round was a synchronous store write every 20 ms of a report flood.
   */
  checkpointEveryMs?: number;
  /** How a gate is asked (tests: a short retry); the clocks and wake are the driver's. */
  gate?: Partial<Pick<GateKeeperOptions, 'retryMs' | 'maxRetryMs' | 'fetch'>>;
  /** Called when a timeout the driver holds begins, ends or moves its end (the API tells it: `timeoutHeld`). */
  onTimeoutHeld?: (rollout: string) => void;
  /** Called with each decision recorded (tests, logs). */
  onDecision?: (rollout: string, decision: Exclude<Decision, { kind: 'wait' }>) => void;
}>;
