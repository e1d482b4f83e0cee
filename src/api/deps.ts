import type { KeyObject } from 'node:crypto';
import type { Logger } from 'pino';
import type { RolloutState } from '../core/rollout/index.ts';
import type { RollbackScope } from '../core/events/index.ts';
import type { Resource } from '../core/declaration/index.ts';
import type { Metrics } from '../metrics.ts';
import type { ReadModel } from '../readModel/readModel.ts';
import type { RolloutView } from '../readModel/rollouts.ts';
import type { LiveObservation } from '../readModel/liveObservation.ts';
import type { ComponentHealth } from '../engine/health.ts';
import type { StartedRollout, StartRolloutInput } from '../engine/rolloutCommands.ts';
import type { EventStore } from '../store/index.ts';
import type { HoldsReader } from '../engine/holds.ts';
import type { TokenTable } from './auth.ts';
import type { ConnectionCaps } from './connectionCaps.ts';
import type { ListenerLimits } from './listenerLimits.ts';
import type { WriteLimits } from './writeLimits.ts';

// What the HTTP API is given by the composition root (src/app/apiDeps.ts) or a test.

/** The sender validates the spec and the node id (src/engine/send.ts): the route passes them as received. */
/** `force`: send to a pinned node too (docs/design.md §8 "Holds and pins"). */
export type SendDeclaration = (
  node: string,
  resources: readonly Resource[],
  options?: Readonly<{ force?: boolean }>,
) => Promise<Readonly<{ digest: string; serial: number }>>;

/** The operator's commands on a rollout (src/engine/rolloutCommands.ts, wired by src/app/apiDeps.ts). */
export type RolloutCommands = Readonly<{
  start: (input: StartRolloutInput) => Promise<StartedRollout>;
  pause: (id: string, by: Readonly<{ by: string; reason: string }>) => Promise<RolloutState>;
  resume: (id: string, by: Readonly<{ by: string }>) => Promise<RolloutState>;
  abort: (id: string, by: Readonly<{ by: string; reason: string }>) => Promise<RolloutState>;
  rollback: (id: string, by: Readonly<{ by: string; reason: string; scope?: RollbackScope }>) => Promise<RolloutState>;
}>;
/** Many nodes in one store transaction (docs/design.md#8-rollouts); each node's outcome of its own, in order. */
export type SendDeclarations = (
  items: readonly Readonly<{ node: string; resources: readonly Resource[]; force?: boolean | undefined }>[],
) => Promise<
  Readonly<{
    outcomes: readonly (
      | Readonly<{ node: string; ok: true; digest: string; serial: number }>
      | Readonly<{ node: string; ok: false; code: string; message: string }>
    )[];
  }>
>;

export type ProjectionStatus = Readonly<{
  isReady: () => boolean;
  lag: () => Promise<bigint>;
  /** The event a fold failed on, when projections stopped there. */
  failure?: () => Readonly<{ position: bigint; id: string; type: string; node: string; message: string }> | null;
  refreshMetrics?: () => Promise<void>;
}>;

/** The write path: null for a part this engine does not run (no broker: no ingest, no relay). */
export type PipelineHealth = Readonly<{ ingest: ComponentHealth | null; relay: ComponentHealth | null }>;

export type ApiDeps = Readonly<{
  readModel: ReadModel;
  store: EventStore;
  /** Reads of the past (state as of, history, timeline, evidence, a send's asOf): the store, or it with its archive (src/app/pastReads.ts). Default: `store`. */
  pastReads?: () => Promise<EventStore>;
  logger: Logger;
  tokens: TokenTable;
  projections?: ProjectionStatus;
  /** Ingest and relay health, read on each probe. */
  pipeline?: () => PipelineHealth;
  send?: SendDeclaration;
  /** Holds and pins (docs/design.md §8); default: read from `store`. */
  holds?: HoldsReader;
  /** Every rollout and how its nodes stand (the projection runner's; default: one made on the read model here). */
  rollouts?: RolloutView;
  /** Start, pause, resume, abort a rollout; absent: those routes answer 500 (no signing key, no store to write). */
  rolloutCommands?: RolloutCommands;
  sendMany?: SendDeclarations;
  metrics?: Metrics;
  /** Exact in-memory last-seen time kept by the ingest (docs/design.md#2-events-the-system-of-record); the newer of it and the fold's wins. */
  lastSeen?: (node: string) => Date | string | null | undefined;
  graceMs?: number;
  /**
   * An engine with no ingest: whether anyone observes liveness now, read from the record before the
   * current view answers (docs/design.md §3 "Not observed"). Absent: this engine observes.
   */
  observation?: LiveObservation;
  now?: () => number;
  /** How long POST declarations waits for the projection to show the send (read-your-writes). */
  sendVisibleMs?: number;
  /** SSE heartbeat interval. */
  heartbeatMs?: number;
  /** An event stream's lifetime; it ends then and the client resumes with Last-Event-ID (default 1 h). */
  streamMaxMs?: number;
  /** Caps on event streams and awaits, per client and in all; unset ones keep connectionCaps.ts's defaults. */
  caps?: Partial<ConnectionCaps>;
  /** The listener's socket cap and timeouts; unset ones keep listenerLimits.ts's defaults. */
  listener?: Partial<ListenerLimits>;
  /**
   * The store's limit on one event's data (default: the adapters' default). A declaration body
   * over it cannot be recorded, so it is refused as 413 before it is read.
   */
  maxEventBytes?: number;
  /** Declarations in one bulk call and body bytes a token may write a minute; unset ones keep writeLimits.ts's defaults. */
  writeLimits?: Partial<WriteLimits>;
  /** A monotonic clock in ms for the byte rate (default performance.now). */
  monotonicNow?: () => number;
  /** How long one plugin may take to load (Fastify's pluginTimeout; default its own 10 s). */
  pluginTimeoutMs?: number;
  /** The engine's audit key (--audit-key, private or public): its public half goes in evidence bundles. */
  auditKey?: KeyObject | null;
  /** The declaration signing public key, for evidence bundles. */
  declarationKey?: KeyObject | null;
  /** The built dashboard (dist/dashboard) served at / and /nodes/:node; null or absent: not served. */
  dashboardDir?: string | null;
}>;
