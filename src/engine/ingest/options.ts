import type { Logger } from 'pino';
import type { WireLimits } from '../../core/wire/index.ts';
import { defaultWireLimits } from '../../core/wire/index.ts';
import type { Metrics } from '../../metrics.ts';
import type { EventStore } from '../../store/port.ts';
import type { IngestSource } from '../../transport/port.ts';
import type { ComponentHealth } from '../health.ts';
import type { NodeBudgetOptions } from '../nodeBudget.ts';
import type { KnownSends } from './sentEarlier.ts';

// What ingest is given and what it answers, and the defaults of what it is not given.

export type IngestOptions = Readonly<{
  store: EventStore;
  source: IngestSource;
  logger: Logger;
  metrics?: Metrics;
  /** Body size/depth limits; default 256 KiB, depth 32. */
  limits?: Partial<WireLimits>;
  /**
   * Accept a message with no `user_id` as coming from the node its body names. For labs whose
   * nodes share one broker account only (docs/design.md#1-contracts-with-the-node-side-fixed-real-nodes-depend-on-them);
   * a *mismatched* user_id is still refused. Env: CONVERGE_TRUST_MISSING_USER_ID=on (read by config, not here).
   */
  trustMissingUserId?: boolean;
  /**
   * Record liveness as transitions (docs/design.md §3 "Liveness as recorded"): NodeHeard and
   * NodeSilent, the observation span and the last-seen lease. Absent: the rule stores were
   * written with before, one AliveSeen per node per `aliveResolutionMs` — kept so tests and
   * benches can write such a store through the engine's own code.
   */
  liveness?: Readonly<{
    engine: string;
    graceMs: number;
    /** How often the last-seen lease is flushed: the bound on what a crash loses. */
    flushMs: number;
    /** The read model's last-seen times, once caught up (a store written before the lease). */
    folded?: () => Promise<ReadonlyMap<string, number>>;
    /** The monotonic clock silences are judged on (tests); default performance.now. */
    mono?: () => number;
  }>;
  /** Without `liveness`: at most one AliveSeen per node per this many ms (default 15 s). */
  aliveResolutionMs?: number;
  /** Most deliveries per store.append call. */
  batchSize?: number;
  /**
   * Most body bytes per store.append call (at least one delivery). An append serialises and
   * writes synchronously: hundreds of wide reports in one call held the event loop for seconds.
   */
  batchBytes?: number;
  /**
   * Most body bytes parsed in one event-loop turn (at least one delivery). amqplib hands every
   * frame it has buffered to onDelivery in one go, and a few wide reports parsed there held the
   * loop for tens of ms (bench/fairness). Past this, deliveries wait, in order, for later turns.
   */
  parseBytesPerTurn?: number;
  /** How long a partial batch waits for company before it is written. */
  flushMs?: number;
  now?: () => Date;
  /** Backoff while the store is unavailable. */
  retry?: Readonly<{ minMs?: number; maxMs?: number }>;
  /**
   * Budget per node (by broker-validated user_id) and queue; the excess is refused to the queue's
   * dead-lettering as CONVERGE_ERR_RATE_LIMITED. Absent: no budget.
   */
  nodeBudget?: Omit<NodeBudgetOptions, 'now'>;
  /**
   * Each node's latest send as the read model has it. Given, a report naming any other digest has
   * the store asked whether that digest was ever sent to the node, and the answer recorded in it
   * (`sentEarlier`, sentEarlier.ts), so a report older than the fold's bounded history is told
   * stale from unknown. Absent, no lookup: such a report counts as unknown.
   */
  knownSends?: KnownSends;
}>;

export type IngestStats = Readonly<{
  received: number;
  redelivered: number;
  appended: number;
  acked: number;
  deadLettered: number;
  coalesced: number;
  /** Messages over their node's budget, refused for the queue to dead-letter (not in deadLettered). */
  rateLimited: number;
  pending: number;
}>;

export type Ingest = Readonly<{
  start: () => Promise<void>;
  /** Stop consuming, write and ack what is in flight (unless the store is down), then stop the source. */
  stop: () => Promise<void>;
  /** The exact last time a node was heard from (alive or report); with `liveness`, seeded at start from the last-seen lease. A new Date each call. */
  lastSeenAt: (node: string) => Date | null;
  /** Every node's lastSeenAt, copied (O(nodes)). */
  lastSeen: () => ReadonlyMap<string, Date>;
  /** False while appends are failing and deliveries are held unacked. */
  isHealthy: () => boolean;
  /** True while consuming is lost with the broker link: liveness is not observed (docs/design.md §3). */
  brokerLost: () => boolean;
  /**
   * Since when (on the liveness clock, performance.now by default) ingest has consumed without a
   * break: its first consuming, or its latest resume after a loss; null while lost, before it first
   * consumed and after the stop. The rollout driver holds wave timeouts by it (docs/design.md §8 "Timeouts
   * while not observed").
   */
  observedSince: () => number | null;
  /** What /readyz and the metrics say of ingest; `pending` is always set. */
  health: () => ComponentHealth;
  stats: () => IngestStats;
}>;

/** The counters behind `stats()`, counted by every part of ingest. */
export type IngestCounts = { -readonly [K in Exclude<keyof IngestStats, 'pending'>]: number };

export const newCounts = (): IngestCounts => ({
  received: 0,
  redelivered: 0,
  appended: 0,
  acked: 0,
  deadLettered: 0,
  coalesced: 0,
  rateLimited: 0,
});

/** Backoff of the retries against the store and the dead-letter publish. */
export type Backoff = Readonly<{ minMs: number; maxMs: number; jitter: number }>;

export type IngestSettings = Readonly<{
  limits: WireLimits;
  trustMissingUserId: boolean;
  aliveResolutionMs: number;
  batchSize: number;
  batchBytes: number;
  flushMs: number;
  parseBytesPerTurn: number;
  now: () => Date;
  /** The same clock in ms, without a Date per delivery (a Date each showed in the profile). */
  nowMs: () => number;
  backoff: Backoff;
}>;

/** The options with their defaults filled in. */
export function settingsOf(options: IngestOptions): IngestSettings {
  return {
    limits: { ...defaultWireLimits, ...options.limits },
    trustMissingUserId: options.trustMissingUserId ?? false,
    aliveResolutionMs: options.aliveResolutionMs ?? 15_000,
    batchSize: Math.max(1, options.batchSize ?? 500),
    batchBytes: Math.max(1, options.batchBytes ?? 256 * 1024),
    flushMs: options.flushMs ?? 10,
    // 128 KiB: the turn that receives and the check phase of the same event-loop iteration each
    // parse up to this (plus one body), so an iteration takes in about two wide reports.
    parseBytesPerTurn: Math.max(1, options.parseBytesPerTurn ?? 128 * 1024),
    now: options.now ?? (() => new Date()),
    nowMs: options.now === undefined ? Date.now : () => options.now!().getTime(),
    // Jittered: every engine instance behind one broker or store retries after the same outage.
    backoff: { minMs: options.retry?.minMs ?? 100, maxMs: options.retry?.maxMs ?? 5_000, jitter: 0.5 },
  };
}
