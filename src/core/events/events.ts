import { z } from 'zod';
import { stringMap } from '../wire/index.ts';
import { rolloutEventDataSchemas, rolloutEventTypes, rolloutIdPattern } from './rollouts.ts';
import type { RolloutEvent } from './rollouts.ts';
import { livenessEventDataSchemas, observationEventTypes } from './liveness.ts';
import type { NodeHeard, NodeSilent, ObservationEvent } from './liveness.ts';
import { auditEventDataSchemas, auditEventTypes } from './audit.ts';
import type { AuditEvent } from './audit.ts';
import { retirementEventDataSchemas } from './retirement.ts';
import { holdEventDataSchemas, holdEventTypes } from './holds.ts';
import type { HoldEvent } from './holds.ts';
import type { NodeRetired } from './retirement.ts';

// docs/design.md §2. Event type names and field names are part of the audit record: change them only
// with an upcaster (see upcasters.ts). Data is plain JSON; times are ISO 8601 strings.

const iso = z.string().refine((s) => !Number.isNaN(Date.parse(s)), 'not an ISO 8601 time');
const digest = z.string().regex(/^[0-9a-f]{64}$/);

export const declarationSentData = z.object({
  node: z.string().min(1),
  serial: z.number().int().min(1),
  digest,
  /** sha256 of the canonical resources alone (docs/design.md §2): groups nodes sent the same spec. v2; upcast for v1. */
  specDigest: digest,
  /** The exact declaration bytes, standard base64. */
  declaration: z.string(),
  /** Ed25519 signature over those bytes, standard base64. */
  signature: z.string(),
  keyId: z.string(),
  resourceIds: z.array(z.string()),
  sentAt: iso,
  /**
   * Present on a rollout's sends: which rollout and wave sent it. Optional and
   * additive, so the data version stays 2: older events have no tag (not sent by a rollout) and
   * an older reader ignores it, as zod objects strip keys they do not name. `rollback: true` on
   * a rollback's send (the node's previous spec again; `wave` is the wave that sent it ours).
   */
  rollout: z
    .object({ id: z.string().regex(rolloutIdPattern), wave: z.number().int().min(1), rollback: z.literal(true).optional() })
    .optional(),
});

export const reportReceivedData = z.object({
  node: z.string().min(1),
  /** Digest the report is about; null for a legacy report that names none. */
  declared: digest.nullable(),
  applied: z.array(z.string()),
  // As the wire reads it: a copy through zod's record would drop a key named "__proto__".
  failed: stringMap,
  refused: z.string(),
  carried: z.array(z.number().int()),
  receivedAt: iso,
  transport: z.object({
    messageId: z.string().nullable(),
    redelivered: z.boolean(),
    userId: z.string().nullable(),
  }),
  /**
   * Set by ingest when `declared` is neither the node's latest send nor one the fold keeps
   * (nodeState.ts sendHistoryLimit): the send of that digest to this node found in the store
   * (its serial and time), or null if none was ever sent. Optional and additive, so the data
   * version stays 2: an event without it folds as before (docs/design.md "Bounded send history").
   */
  sentEarlier: z
    .object({ serial: z.number().int().min(1), sentAt: iso })
    .nullable()
    .optional(),
});

export const aliveSeenData = z.object({
  node: z.string().min(1),
  seenAt: iso,
});

export type DeclarationSentData = Readonly<z.infer<typeof declarationSentData>>;
export type ReportReceivedData = Readonly<z.infer<typeof reportReceivedData>>;
export type AliveSeenData = Readonly<z.infer<typeof aliveSeenData>>;

/** Emmett-style plain events: `{type, data}`. */
export type Event<Type extends string, Data> = Readonly<{ type: Type; data: Data }>;

export type DeclarationSent = Event<'DeclarationSent', DeclarationSentData>;
export type ReportReceived = Event<'ReportReceived', ReportReceivedData>;
export type AliveSeen = Event<'AliveSeen', AliveSeenData>;
/** The events of a node's stream (docs/design.md §2), the ones the node fold reads. */
export type NodeEvent = DeclarationSent | ReportReceived | AliveSeen | NodeHeard | NodeSilent | NodeRetired;
export type NodeEventType = NodeEvent['type'];
/** Everything a store holds: node streams, rollout streams, observation spans and audit checkpoints. */
export type ConvergeEvent = NodeEvent | RolloutEvent | ObservationEvent | AuditEvent | HoldEvent;
export type ConvergeEventType = ConvergeEvent['type'];

export const nodeEventTypes = [
  'DeclarationSent',
  'ReportReceived',
  'AliveSeen',
  'NodeHeard',
  'NodeSilent',
  'NodeRetired',
] as const satisfies readonly NodeEventType[];
export const eventTypes = [
  ...nodeEventTypes,
  ...rolloutEventTypes,
  ...observationEventTypes,
  ...auditEventTypes,
  ...holdEventTypes,
] as const satisfies readonly ConvergeEventType[];

export const eventDataSchemas = {
  DeclarationSent: declarationSentData,
  ReportReceived: reportReceivedData,
  AliveSeen: aliveSeenData,
  ...livenessEventDataSchemas,
  ...retirementEventDataSchemas,
  ...rolloutEventDataSchemas,
  ...auditEventDataSchemas,
  ...holdEventDataSchemas,
} as const;

const nodeTypes: ReadonlySet<string> = new Set(nodeEventTypes);
/** A node's event, as opposed to a rollout's: what the node fold and the node read model take. */
export const isNodeEvent = <E extends ConvergeEvent>(e: E): e is Extract<E, NodeEvent> => nodeTypes.has(e.type);

const rolloutTypes: ReadonlySet<string> = new Set(rolloutEventTypes);
/** A rollout's event (not a node's, nor an observation span's). */
export const isRolloutEvent = <E extends ConvergeEvent>(e: E): e is Extract<E, RolloutEvent> => rolloutTypes.has(e.type);

/** An event as a store hands it back: with its id, stream, revision in the stream, and global position. */
export type Recorded<E extends ConvergeEvent = ConvergeEvent> = E &
  Readonly<{
    id: string;
    stream: string;
    /** Revision in its stream, counted from 0 as EventStoreDB counts it. */
    revision: bigint;
    /** Global position in the store; increasing, never reused. */
    position: bigint;
  }>;

/** docs/design.md §2: one stream per node, in EventStoreDB's category convention. */
export const streamPrefix = 'node-';
export const streamOf = (node: string): string => `${streamPrefix}${node}`;
export const nodeOfStream = (stream: string): string | null => (stream.startsWith(streamPrefix) ? stream.slice(streamPrefix.length) : null);

/** Whether `e` is a rollback's declaration from rollout `rollout` (docs/design.md §8, "Rollback"). */
export const isRollbackSendOf = (e: Readonly<{ type: string; data: unknown }> | undefined, rollout: string): boolean =>
  e?.type === 'DeclarationSent' &&
  (e.data as DeclarationSentData).rollout?.id === rollout &&
  (e.data as DeclarationSentData).rollout?.rollback === true;
