import { readDeclaration, specDigestOf } from '../declaration/index.ts';
import { ConvergeError } from '../errors.ts';
import { eventDataSchemas, eventTypes } from './events.ts';
import { fastDecoders } from './decodeFast.ts';
import { rolloutEventTypes } from './rollouts.ts';
import type { RolloutEventType } from './rollouts.ts';
import type { ConvergeEvent, ConvergeEventType } from './events.ts';

// Stored events carry `metadata.v`, the version of their data's shape. Reading one back runs
// the upcasters from its version to the current one, then checks the current schema (zod at
// the edge). An upcaster is a pure function of the old data.

// v2: DeclarationSent carries `specDigest` (docs/design.md#2-events-the-system-of-record).
export const currentVersion = 2;

type Upcaster = (data: Readonly<Record<string, unknown>>) => Record<string, unknown>;

const unchanged: Upcaster = (data) => data;

/** v1 → v2: the spec digest, from the declaration bytes the event already holds (never re-encoded, only read). */
const withSpecDigest: Upcaster = (data) => {
  if (typeof data.specDigest === 'string') return data;
  if (typeof data.declaration !== 'string') return data; // the schema check below names what is wrong
  try {
    const { resources } = readDeclaration(Buffer.from(data.declaration, 'base64'));
    return { ...data, specDigest: specDigestOf(resources) };
  } catch (cause) {
    throw new ConvergeError(
      'CONVERGE_ERR_EVENT_INVALID',
      `DeclarationSent v1 holds declaration bytes that cannot be read: ${(cause as Error).message}`,
      { cause },
    );
  }
};

type Upcasters = Readonly<Record<number, Upcaster>>;

// Rollout events were first written at v2: none was ever stored at v1, so none has an
// upcaster, and one claiming v1 is refused as invalid.
const bornAtV2 = Object.fromEntries(rolloutEventTypes.map((t) => [t, {}])) as Record<RolloutEventType, Upcasters>;

/** upcasters[type][v] turns version v data into version v+1. */
export const upcasters: Readonly<Record<ConvergeEventType, Upcasters>> = {
  DeclarationSent: { 1: withSpecDigest },
  ReportReceived: { 1: unchanged },
  AliveSeen: { 1: unchanged },
  // Liveness transitions and observation spans were first written at v2, as rollout events were.
  NodeHeard: {},
  NodeSilent: {},
  // Born at v2 too.
  NodeRetired: {},
  NodeHeld: {},
  NodeReleased: {},
  NodePinned: {},
  NodeUnpinned: {},
  ObservationStarted: {},
  ObservationStopped: {},
  // Audit checkpoints too (docs/audit.md#checkpoints-and-witnesses).
  AuditCheckpointed: {},
  ...bornAtV2,
};

const typeSet: ReadonlySet<string> = new Set(eventTypes);
export const isEventType = (t: string): t is ConvergeEventType => typeSet.has(t);

export const eventMetadata = (): Readonly<{ v: number }> => ({ v: currentVersion });

/** Turn stored (type, data, metadata) back into a typed event, upcasting old shapes. */
export function decodeEvent(type: string, data: unknown, metadata?: unknown): ConvergeEvent {
  const d = decodeEventData(type, data, metadata);
  return { type, data: d } as ConvergeEvent;
}

/**
 * decodeEvent's data alone, for a store that builds its Recorded in one object. A current-version
 * node event the engine wrote takes the fast check (decodeFast.ts) and comes back as the parsed
 * object itself; anything else goes through the upcasters and zod, which name what is wrong.
 */
export function decodeEventData(type: string, data: unknown, metadata?: unknown): ConvergeEvent['data'] {
  if (!isEventType(type))
    throw new ConvergeError(
      'CONVERGE_ERR_EVENT_INVALID',
      `unknown event type ${JSON.stringify(type)}: this Converge does not know it (a newer release, or another writer, stored it)`,
    );
  let v =
    typeof metadata === 'object' && metadata !== null && typeof (metadata as { v?: unknown }).v === 'number'
      ? (metadata as { v: number }).v
      : 1;
  if (v === currentVersion) {
    const fast = fastDecoders[type]?.(data);
    if (fast !== undefined && fast !== null) return fast as ConvergeEvent['data'];
  }
  if (v > currentVersion) {
    throw new ConvergeError(
      'CONVERGE_ERR_EVENT_INVALID',
      `${type} v${v} was written by a newer Converge (this one reads up to v${currentVersion})`,
    );
  }
  let d = data as Record<string, unknown>;
  for (; v < currentVersion; v++) {
    const up = upcasters[type][v];
    if (!up) throw new ConvergeError('CONVERGE_ERR_EVENT_INVALID', `no upcaster for ${type} v${v}`);
    d = up(d);
  }
  const r = eventDataSchemas[type].safeParse(d);
  if (!r.success) {
    throw new ConvergeError(
      'CONVERGE_ERR_EVENT_INVALID',
      `${type} does not match its schema: ${r.error.issues[0]?.path.join('.')} ${r.error.issues[0]?.message}`,
    );
  }
  return r.data as ConvergeEvent['data'];
}
