import { buildDeclaration, digestOf, signDeclaration, specDigestOf } from '../declaration/index.ts';
import type { Resource, SigningKey } from '../declaration/index.ts';
import type { Alive, Report } from '../wire/index.ts';
import type { AliveSeen, DeclarationSent, ReportReceived } from './events.ts';
import type { NodeHeard, NodeSilent, ObservationStarted, ObservationStopped } from './liveness.ts';
import {
  aliveSeenId,
  declarationSentId,
  nodeHeardId,
  nodeSilentId,
  observationEventId,
  reportReceivedId,
  rollbackSendId,
  rolloutSendId,
} from './ids.ts';

// Constructors for the three events, each with its deterministic id (docs/design.md §2). The engine,
// the lab and the tests all build events here so the ids are derived one way only.

export type WithId<E> = E & Readonly<{ id: string }>;

export type DeclarationToSend = Readonly<{
  node: string;
  serial: number;
  resources: readonly Resource[];
  key: SigningKey;
  now: Date;
  /** A rollout's send: tagged with it, and named by rollout and node (ids.ts); a rollback's, by rollback and node. */
  rollout?: Readonly<{ id: string; wave: number; rollback?: true }>;
  /** The spec digest of `resources`, when the caller has it already (a bulk send computes it once). */
  specDigest?: string;
}>;

/** A declaration's bytes as sent (base64), their digest and their Ed25519 signature (base64). */
export type SignedDeclaration = Readonly<{ digest: string; declaration: string; signature: string }>;

/** Build, digest and sign the declaration bytes once: the part of a send a signing thread can do. */
export function signDeclarationOf({
  node,
  serial,
  resources,
  key,
  now,
}: Pick<DeclarationToSend, 'node' | 'serial' | 'resources' | 'key' | 'now'>): SignedDeclaration {
  const bytes = buildDeclaration({ node, serial, issued: now, resources });
  return { digest: digestOf(bytes), declaration: bytes.toString('base64'), signature: signDeclaration(bytes, key).toString('base64') };
}

/**
 * The event that records a declaration signed already (`signed`, from `signDeclarationOf` for the
 * same node, serial, resources and time): one shape whichever thread signed it.
 */
export function declarationSentOf(
  { node, serial, resources, keyId, now, rollout, specDigest }: Omit<DeclarationToSend, 'key'> & Readonly<{ keyId: string }>,
  signed: SignedDeclaration,
): WithId<DeclarationSent> {
  return {
    id:
      rollout === undefined
        ? declarationSentId(node, serial)
        : rollout.rollback === true
          ? rollbackSendId(node, rollout.id)
          : rolloutSendId(node, rollout.id),
    type: 'DeclarationSent',
    data: {
      node,
      serial,
      digest: signed.digest,
      specDigest: specDigest ?? specDigestOf(resources),
      declaration: signed.declaration,
      signature: signed.signature,
      keyId,
      resourceIds: resources.map((r) => r.id),
      sentAt: now.toISOString(),
      ...(rollout === undefined
        ? {}
        : { rollout: { id: rollout.id, wave: rollout.wave, ...(rollout.rollback === true ? { rollback: true as const } : {}) } }),
    },
  };
}

/** Build, digest and sign the declaration bytes once, and record them in the event. */
export function makeDeclarationSent(d: DeclarationToSend): WithId<DeclarationSent> {
  return declarationSentOf({ ...d, keyId: d.key.keyId }, signDeclarationOf(d));
}

// Under load many reports share one millisecond (~36 per ms in bench/ingest.ts), and
// toISOString was ~0.6 µs of each; the string for the same instant is the same string.
// Each delivery still has its own receipt time; only the formatting is shared.
// A time may come as ms since the epoch (ingest's clock): no Date per delivery.
let lastMs = Number.NaN;
let lastIso = '';
const isoOf = (at: Date | number): string => {
  const ms = typeof at === 'number' ? at : at.getTime();
  if (ms !== lastMs) {
    lastIso = (typeof at === 'number' ? new Date(at) : at).toISOString(); // throws for an invalid time, as before
    lastMs = ms;
  }
  return lastIso;
};

export type TransportFacts = Readonly<{ messageId: string | null; redelivered: boolean; userId: string | null }>;

/** `receivedAt`: a Date, or ms since the epoch. */
export function makeReportReceived(
  report: Report,
  body: Uint8Array,
  transport: TransportFacts,
  receivedAt: Date | number,
): WithId<ReportReceived> {
  return {
    id: reportReceivedId(report.node, transport.messageId, body),
    type: 'ReportReceived',
    data: {
      node: report.node,
      declared: report.declared,
      // Shared, not copied (~0.6 µs a report on the ingest path): the Report is readonly and
      // fresh from the parser, and every store serialises the data when it appends.
      applied: report.applied as string[],
      failed: report.failed,
      refused: report.refused,
      carried: report.carried as number[],
      receivedAt: isoOf(receivedAt),
      transport,
    },
  };
}

/** `seenAt`: a Date, or ms since the epoch. */
export function makeAliveSeen(alive: Alive, seenAt: Date | number): WithId<AliveSeen> {
  const at = isoOf(seenAt);
  return { id: aliveSeenId(alive.node, at), type: 'AliveSeen', data: { node: alive.node, seenAt: at } };
}

/** A node heard at `at` (ms) while held silent or never seen; `before`: the last time it was heard before (ms), if known. */
export function makeNodeHeard(node: string, at: number, before: number | null): WithId<NodeHeard> {
  const text = isoOf(at);
  return {
    id: nodeHeardId(node, text),
    type: 'NodeHeard',
    data: { node, at: text, lastSeenBefore: before === null ? null : new Date(before).toISOString() },
  };
}

/** A node last heard at `lastSeen` (ms), seen silent at `observed` (ms) by an engine whose grace is `graceMs`. */
export function makeNodeSilent(node: string, lastSeen: number, observed: number, graceMs: number): WithId<NodeSilent> {
  const lastSeenAt = new Date(lastSeen).toISOString();
  return {
    id: nodeSilentId(node, lastSeenAt),
    type: 'NodeSilent',
    data: { node, lastSeenAt, observedAt: new Date(observed).toISOString(), graceMs },
  };
}

/** An engine began observing at `at` (ms); `lastFlushAt`: when its last-seen lease was last flushed before (ms), null if never. */
export function makeObservationStarted(
  engine: string,
  at: number,
  graceMs: number,
  lastFlushAt: number | null,
): WithId<ObservationStarted> {
  const text = new Date(at).toISOString();
  return {
    id: observationEventId(engine, 'ObservationStarted', text),
    type: 'ObservationStarted',
    data: { engine, at: text, graceMs, lastFlushAt: lastFlushAt === null ? null : new Date(lastFlushAt).toISOString() },
  };
}

/** An engine stopped observing at `at` (ms). */
export function makeObservationStopped(engine: string, at: number, why: ObservationStopped['data']['why']): WithId<ObservationStopped> {
  const text = new Date(at).toISOString();
  return { id: observationEventId(engine, 'ObservationStopped', text), type: 'ObservationStopped', data: { engine, at: text, why } };
}
