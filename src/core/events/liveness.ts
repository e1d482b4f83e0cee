import { z } from 'zod';
import type { Event } from './events.ts';

// docs/design.md §2 "Liveness as transitions": a node's liveness is recorded when it changes, not
// each time the node says it is alive. NodeHeard: heard while the engine held it silent or had
// never seen it. NodeSilent: the engine's grace elapsed, on its monotonic clock, since the exact
// last time it heard the node. Between the two nothing is appended, however often the node speaks.
//
// Observation spans say when an engine was watching at all, in a stream of their own: liveness
// as of a moment no engine observed is `not-observed`, never connected or disconnected.

const iso = z.string().refine((s) => !Number.isNaN(Date.parse(s)), 'not an ISO 8601 time');

export const nodeHeardData = z.object({
  node: z.string().min(1),
  at: iso,
  /** The last time the engine knew the node was heard before this (null: never, as far as it knows). */
  lastSeenBefore: iso.nullable(),
});

export const nodeSilentData = z.object({
  node: z.string().min(1),
  /** The exact last time the node was heard. */
  lastSeenAt: iso,
  /** When the engine saw the grace elapse (lastSeenAt + graceMs, give or take a timer's lateness). */
  observedAt: iso,
  /** The grace the engine judged with: the record's own, not a reader's. */
  graceMs: z.number().int().min(1),
});

export const observationStartedData = z.object({
  engine: z.string().min(1),
  at: iso,
  graceMs: z.number().int().min(1),
  /** When observation was last known good before this start (the last-seen table's last flush); null: never. */
  lastFlushAt: iso.nullable(),
});

export const observationStoppedData = z.object({
  engine: z.string().min(1),
  at: iso,
  why: z.enum(['stopped', 'broker-lost', 'crashed']),
});

export type NodeHeardData = Readonly<z.infer<typeof nodeHeardData>>;
export type NodeSilentData = Readonly<z.infer<typeof nodeSilentData>>;
export type ObservationStartedData = Readonly<z.infer<typeof observationStartedData>>;
export type ObservationStoppedData = Readonly<z.infer<typeof observationStoppedData>>;

export type NodeHeard = Event<'NodeHeard', NodeHeardData>;
export type NodeSilent = Event<'NodeSilent', NodeSilentData>;
export type ObservationStarted = Event<'ObservationStarted', ObservationStartedData>;
export type ObservationStopped = Event<'ObservationStopped', ObservationStoppedData>;
export type ObservationEvent = ObservationStarted | ObservationStopped;

export const observationEventTypes = ['ObservationStarted', 'ObservationStopped'] as const satisfies readonly ObservationEvent['type'][];

/** The one stream observation spans are recorded in (not a node's: no node is named "observation" by it). */
export const observationStream = 'observation';

export const livenessEventDataSchemas = {
  NodeHeard: nodeHeardData,
  NodeSilent: nodeSilentData,
  ObservationStarted: observationStartedData,
  ObservationStopped: observationStoppedData,
} as const;
