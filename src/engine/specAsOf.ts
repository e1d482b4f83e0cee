import { readDeclaration } from '../core/declaration/index.ts';
import type { Resource } from '../core/declaration/index.ts';
import { ConvergeError } from '../core/errors.ts';
import type { ErrorCode } from '../core/errors.ts';
import { readMoment } from '../../projections/index.ts';
import { streamOf } from '../core/events/index.ts';
import type { DeclarationSent, Recorded } from '../core/events/index.ts';
import type { EventStore } from '../store/port.ts';

// Restore from history (docs/design.md §2, "Restore from history"): the spec a node had been sent
// at a moment, read from its own stream. Time maps to position by stream order: the node's
// DeclarationSent events are walked in position order up to the first stamped after the moment,
// and the last one before it is the answer. Clocks of several engines may disagree, so a send
// stored later but stamped earlier is never taken in preference to one stored before it.

export type SpecAsOf = Readonly<{
  /** The resources exactly as that declaration's bytes hold them. */
  resources: readonly Resource[];
  specDigest: string;
  serial: number;
  digest: string;
  sentAt: string;
  position: bigint;
}>;

/** A moment in the store's history: a time, or a store position. */
export type Moment = Readonly<{ at: Date } | { position: bigint }>;

/**
 * `--as-of` / `asOf` as written, read as every moment is (projections/node/forensics.ts readAt):
 * all digits, a store position; else an ISO 8601 time with its zone. Anything else is refused with
 * `code`: a send or a rollout as of a misread moment would send what nobody asked for.
 */
export function parseMoment(text: string, code: ErrorCode): Moment {
  const at = readMoment('the moment to restore (asOf)', text, code, { asOf: text });
  return at.kind === 'position' ? { position: at.position } : { at: new Date(at.time) };
}

export const describeMoment = (m: Moment): string => ('at' in m ? m.at.toISOString() : `position ${m.position}`);

/**
 * A moment that has a history to restore from, or refused with `code`: not a time to come (after
 * `now`), not a position past the store's head. Resolves with the head.
 */
export async function checkMoment(store: EventStore, m: Moment, now: Date, code: ErrorCode): Promise<bigint> {
  const head = (await store.headPosition()) ?? 0n;
  if ('at' in m) {
    if (Number.isNaN(m.at.getTime())) throw new ConvergeError(code, 'the moment to restore (asOf) is not a valid time');
    if (m.at.getTime() > now.getTime())
      throw new ConvergeError(code, `the moment to restore (asOf) ${m.at.toISOString()} is a time to come: it has no history yet`, {
        details: { asOf: m.at.toISOString() },
      });
    return head;
  }
  if (m.position < 0n || m.position > head)
    throw new ConvergeError(code, `the position to restore (asOf) ${m.position} is past the store's head (${head})`, {
      details: { asOf: m.position.toString(), head: head.toString() },
    });
  return head;
}

/**
 * A send as of a moment (`send --as-of`, the API's `asOf`): the moment checked as a rollout's is
 * (checkMoment, refused with `code`), then the spec the node had been sent at it.
 */
export async function specAsOf(store: EventStore, node: string, m: Moment, now: Date, code: ErrorCode): Promise<SpecAsOf> {
  await checkMoment(store, m, now, code);
  const chosen = await specAt(store, node, m);
  if (chosen === null)
    throw new ConvergeError('CONVERGE_ERR_NODE_NOT_FOUND', `${node} had been sent no declaration at or before ${describeMoment(m)}`, {
      details: { node, asOf: 'at' in m ? m.at.toISOString() : m.position.toString() },
    });
  return chosen;
}

/**
 * The spec a node had been sent at a moment, or null if it had been sent nothing by then. At a
 * position: its latest send stored at or before it. At a time: as specAsOf walks. Sends stored past
 * `upTo` are not looked at (a rollout as of a moment bounds its history by the head it started at).
 */
export async function specAt(store: EventStore, node: string, moment: Moment, upTo?: bigint): Promise<SpecAsOf | null> {
  const limit = 'position' in moment ? moment.position : upTo;
  const at = 'at' in moment ? moment.at.getTime() : Number.POSITIVE_INFINITY;
  let chosen: Recorded<DeclarationSent> | null = null;
  for (const e of await store.readStream(streamOf(node))) {
    if (limit !== undefined && e.position > limit) break;
    if (e.type !== 'DeclarationSent') continue;
    const sent = e as Recorded<DeclarationSent>;
    if (Date.parse(sent.data.sentAt) > at) break;
    chosen = sent;
  }
  return chosen === null ? null : specOfSend(chosen);
}

/** The spec a recorded send carried. */
export function specOfSend(sent: Recorded<DeclarationSent>): SpecAsOf {
  // The bytes are the record: the resources are read from them, not rebuilt, so the spec digest is the same.
  const { resources } = readDeclaration(Buffer.from(sent.data.declaration, 'base64'));
  return {
    resources,
    specDigest: sent.data.specDigest,
    serial: sent.data.serial,
    digest: sent.data.digest,
    sentAt: sent.data.sentAt,
    position: sent.position,
  };
}

/**
 * The spec a node had before a rollout's send to it (a rollback restores it, docs/design.md §8):
 * the latest DeclarationSent in its stream before that send. Null when that send was its first,
 * or when the rollout sent it nothing.
 */
export async function specBeforeRollout(store: EventStore, node: string, rollout: string): Promise<SpecAsOf | null> {
  let before: Recorded<DeclarationSent> | null = null;
  for (const e of await store.readStream(streamOf(node))) {
    if (e.type !== 'DeclarationSent') continue;
    const sent = e as Recorded<DeclarationSent>;
    if (sent.data.rollout?.id === rollout && sent.data.rollout.rollback !== true) return before === null ? null : specOfSend(before);
    before = sent;
  }
  return null;
}
