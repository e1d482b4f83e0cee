import { ConvergeError } from '../core/errors.ts';
import { eventMetadata } from '../core/events/index.ts';
import type { ConvergeEvent, Recorded } from '../core/events/index.ts';
import type { ExpectedRevision, StreamWrite } from './port.ts';

// Rules every adapter applies the same way, so the conformance suite sees one behaviour.

/** docs/design.md §5 default: a declaration carries whole resource specs, so 1 MiB leaves ample room. */
export const defaultMaxEventBytes = 1024 * 1024;

export type EncodedEvent = Readonly<{ id: string; type: string; data: string; metadata: string }>;
export type EncodedWrite = Readonly<{ stream: string; expected: ExpectedRevision; events: readonly EncodedEvent[] }>;

/** The metadata text every event this version appends carries. */
export const metadataJson = JSON.stringify(eventMetadata());

/**
 * Serialise every event once, up front, so an oversized event or a repeated id rejects the whole
 * call before anything is written (no adapter may write half of a call it will then refuse).
 */
export function encodeWrites(writes: readonly StreamWrite[], maxEventBytes: number): EncodedWrite[] {
  const ids = new Set<string>();
  const out: EncodedWrite[] = [];
  for (const w of writes) {
    if (typeof w.stream !== 'string' || w.stream === '')
      throw new ConvergeError('CONVERGE_ERR_BAD_REQUEST', 'append: stream name must be a non-empty string');
    const events: EncodedEvent[] = [];
    for (const e of w.events) {
      if (ids.has(e.id)) {
        throw new ConvergeError('CONVERGE_ERR_DUPLICATE_EVENT_ID', `append: event id ${e.id} appears twice in one call`, {
          details: { id: e.id, stream: w.stream },
        });
      }
      ids.add(e.id);
      const data = JSON.stringify(e.data);
      // Fast path: a string's UTF-8 length is at most 3 bytes per UTF-16 unit, so only
      // count exactly when the cheap bound could exceed the limit.
      const size = data.length * 3 <= maxEventBytes ? data.length : Buffer.byteLength(data, 'utf8');
      if (size > maxEventBytes) {
        throw new ConvergeError(
          'CONVERGE_ERR_EVENT_TOO_LARGE',
          `append: ${e.type} ${e.id} to ${w.stream} is ${size} bytes of data, over the store limit of ${maxEventBytes} bytes; nothing was written`,
          { details: { id: e.id, stream: w.stream, size, limit: maxEventBytes } },
        );
      }
      events.push({ id: e.id, type: e.type, data, metadata: metadataJson });
    }
    out.push({ stream: w.stream, expected: w.expected, events });
  }
  return out;
}

// The expected-revision rules live apart (revisionRules.ts): the SQLite writer thread loads them without the event schemas.
export { expectedRevisionHolds, wrongExpectedRevision } from './revisionRules.ts';

export const storeClosed = (kind: string): ConvergeError =>
  new ConvergeError('CONVERGE_ERR_STORE_CLOSED', `${kind} event store has been closed`);

/**
 * Build a Recorded from a decoded event. An object literal, not `{ ...event, id, … }`: on the
 * replay path the spread made full reads about twice as slow (bench/store.ts, replay row).
 */
export const recorded = (event: ConvergeEvent, id: string, stream: string, revision: bigint, position: bigint): Recorded =>
  ({ type: event.type, data: event.data, id, stream, revision, position }) as Recorded;
