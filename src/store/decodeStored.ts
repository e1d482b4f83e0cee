import { decodeEventData } from '../core/events/index.ts';
import type { ConvergeEvent } from '../core/events/index.ts';
import { ConvergeError } from '../core/errors.ts';

// A stored event this Converge cannot read — a type it does not know (a newer release wrote it
// on a shared store), a newer version of a shape, data that does not match — fails every read
// that meets it, naming where it lies. The projections stop before it (projectionRunner.ts), as
// they stop on a fold that fails; docs/operations.md "Upgrades" says what an operator sees.

/** Where a stored event lies. */
export type StoredAt = Readonly<{ position: bigint | number; stream: string; id: string }>;

export type UnreadableEvent = Readonly<{ position: bigint; stream: string; id: string; type: string; message: string }>;

function unreadable(err: unknown, type: string, at: StoredAt): ConvergeError {
  const why = err instanceof Error ? err.message : String(err);
  return new ConvergeError(
    'CONVERGE_ERR_EVENT_INVALID',
    `the event at position ${at.position} (stream ${JSON.stringify(at.stream)}, id ${at.id}) cannot be read: ${why}`,
    { cause: err, details: { position: String(at.position), stream: at.stream, id: at.id, type, reason: why } },
  );
}

/** decodeEventData, its failure naming the event's position, stream and id. */
export function decodeStoredData(type: string, data: unknown, metadata: unknown, at: StoredAt): ConvergeEvent['data'] {
  try {
    return decodeEventData(type, data, metadata);
  } catch (err) {
    throw unreadable(err, type, at);
  }
}

/** The stored event a read failed on (decodeStoredData's error), or null for any other failure. */
export function unreadableEventOf(err: unknown): UnreadableEvent | null {
  if (!(err instanceof ConvergeError) || err.code !== 'CONVERGE_ERR_EVENT_INVALID') return null;
  const d = err.details;
  if (typeof d?.['position'] !== 'string' || typeof d['type'] !== 'string' || typeof d['stream'] !== 'string') return null;
  return { position: BigInt(d['position']), stream: d['stream'], id: String(d['id']), type: d['type'], message: String(d['reason']) };
}
