import { WrongExpectedVersionError, jsonEvent } from '@eventstore/db-client';
import type { AppendExpectedRevision, JSONType } from '@eventstore/db-client';
import { encodeWrites, expectedRevisionHolds, wrongExpectedRevision } from '../appendRules.ts';
import type { EncodedWrite } from '../appendRules.ts';
import type { AppendResult, StreamWrite } from '../port.ts';
import type { EsdbClient } from './esdbClient.ts';
import { esdbError } from './esdbErrors.ts';
import type { EsdbReads } from './esdbReads.ts';

// The EventStoreDB store's append. EventStoreDB has no cross-stream transaction: a many-stream
// append is concurrent per-stream appends, atomic per stream, not per call. Event-id idempotency
// is what the server gives for explicit expected revisions, plus a check of the stream's tail on
// a conflict; an id reused in *another* stream is not detected.

type StreamAppended = { stream: string; nextExpected: bigint; written: number; position: bigint | null };

export type EsdbAppendDeps = Readonly<{
  client: EsdbClient;
  reads: Pick<EsdbReads, 'readRaw' | 'currentRevision'>;
  /** Throws once the store is closed. */
  open: () => void;
  maxEventBytes: number;
}>;

export function createEsdbAppend(deps: EsdbAppendDeps): (writes: readonly StreamWrite[]) => Promise<AppendResult> {
  const { client, open, maxEventBytes } = deps;
  const { readRaw, currentRevision } = deps.reads;

  /** One stream's write, with the port's idempotency: already-stored ids are skipped, never duplicated. */
  async function appendOne(w: EncodedWrite): Promise<StreamAppended> {
    if (w.events.length === 0) {
      const current = await currentRevision(w.stream);
      if (!expectedRevisionHolds(w.expected, current)) throw wrongExpectedRevision(w.stream, w.expected, current);
      return { stream: w.stream, nextExpected: current, written: 0, position: null };
    }
    // Read the stream's tail first, whatever the expected revision: drop events a previous
    // attempt already stored (they can only be in the recent tail), check the expectation here,
    // and pin the revision just read so the server's own check and idempotency apply. A retry
    // with an explicit revision must not rely on the server: it answers "success" for the same
    // ids right after the expected revision (an idempotent write), which would be reported as
    // written, and it appends ids again when the stream is still at the expected revision.
    const tail = await readRaw(w.stream, 'backwards', undefined, Math.max(64, w.events.length * 4));
    const current = tail[0]?.revision ?? -1n;
    const stored = new Set(tail.map((e) => e.id));
    const events = w.events.filter((e) => !stored.has(e.id));
    if (events.length === 0) return { stream: w.stream, nextExpected: current, written: 0, position: null };
    if (!expectedRevisionHolds(w.expected, current)) throw wrongExpectedRevision(w.stream, w.expected, current);
    const expected: AppendExpectedRevision = current < 0n ? 'no_stream' : current;
    try {
      const r = await client.appendToStream(
        w.stream,
        events.map((e) =>
          jsonEvent({ id: e.id, type: e.type, data: JSON.parse(e.data) as JSONType, metadata: JSON.parse(e.metadata) as JSONType }),
        ),
        { expectedRevision: expected },
      );
      // No position: the server treated the append as an idempotent repeat of a concurrent retry.
      if (r.position === undefined) return { stream: w.stream, nextExpected: await currentRevision(w.stream), written: 0, position: null };
      return { stream: w.stream, nextExpected: r.nextExpectedRevision, written: events.length, position: r.position.commit };
    } catch (err) {
      if (!(err instanceof WrongExpectedVersionError)) throw esdbError(err, `append to ${w.stream}`);
      return landedBefore(w, events, expected, err);
    }
  }

  /** A conflict: a retry of a write that did land has its events right after the revision it expected; anything else is refused. */
  async function landedBefore(
    w: EncodedWrite,
    events: EncodedWrite['events'],
    expected: AppendExpectedRevision,
    err: WrongExpectedVersionError,
  ): Promise<StreamAppended> {
    const from = expected === 'no_stream' ? 0n : typeof expected === 'bigint' ? expected + 1n : null;
    if (from !== null) {
      const there = await readRaw(w.stream, 'forwards', from, events.length);
      if (there.length === events.length && there.every((e, i) => e.id === events[i]!.id)) {
        return { stream: w.stream, nextExpected: await currentRevision(w.stream), written: 0, position: null };
      }
    }
    const actual = typeof err.actualVersion === 'bigint' ? err.actualVersion : err.actualVersion === 'no_stream' ? -1n : null;
    throw wrongExpectedRevision(w.stream, w.expected, actual, err);
  }

  return async function append(writes: readonly StreamWrite[]): Promise<AppendResult> {
    open();
    const encoded = encodeWrites(writes, maxEventBytes);
    // Streams are written concurrently, writes to the same stream one after another in call order.
    const chains = new Map<string, Promise<unknown>>();
    const results = encoded.map((w) => {
      const previous = chains.get(w.stream) ?? Promise.resolve();
      const mine = previous.then(() => appendOne(w));
      chains.set(
        w.stream,
        mine.catch(() => undefined),
      );
      return mine;
    });
    const settled = await Promise.allSettled(results);
    const failed = settled.find((s) => s.status === 'rejected');
    if (failed !== undefined) throw esdbError(failed.reason, 'append');
    const streams: AppendResult['streams'][number][] = [];
    let position: bigint | null = null;
    for (const s of settled) {
      if (s.status !== 'fulfilled') continue;
      streams.push({ stream: s.value.stream, nextExpected: s.value.nextExpected, written: s.value.written });
      if (s.value.position !== null && (position === null || s.value.position > position)) position = s.value.position;
    }
    return { streams, position };
  };
}
