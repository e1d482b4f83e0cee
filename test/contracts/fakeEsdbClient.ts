import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { MaxAppendSizeExceededError, UnavailableError, WrongExpectedVersionError } from '@eventstore/db-client';
import type {
  AllStreamRecordedEvent,
  AllStreamResolvedEvent,
  AppendExpectedRevision,
  AppendResult,
  CurrentRevision,
  EventData,
  Filter,
  Position,
  ReadPosition,
  ReadRevision,
} from '@eventstore/db-client';
// The client's own stream classes: the emulation replaces the *server* (and the gRPC call under
// the client), not the client's stream handling, so 'caughtUp' timing, backpressure, error
// conversion and unsubscribe behave exactly as they do in @eventstore/db-client 6.2.1.
import { ReadStream } from '@eventstore/db-client/dist/streams/utils/ReadStream.js';
import { Subscription } from '@eventstore/db-client/dist/streams/utils/Subscription.js';
import type { EsdbClient } from '../../src/store/esdb/esdbEventStore.ts';

// An in-memory emulation of the parts of an EventStoreDB server that src/store/esdb/esdbEventStore.ts
// reaches through `EventStoreDBClient`: appendToStream, readStream, readAll, subscribeToAll,
// setStreamMetadata, dispose. It is NOT EventStoreDB. It is written from the client's .d.ts/.js
// (node_modules/@eventstore/db-client/dist) and public documentation; where that does not say how
// the server behaves, the comment says so and the emulation picks the behaviour that is hardest
// for the adapter (so a pass here is not a pass against a server).
//
// Faults, for the adapter's error handling:
// - `dropSubscriptions()` ends every open subscription the way grpc-js ends a call whose status
//   is not OK (push(null), then 'error'; @grpc/grpc-js build/src/client.js onReceiveStatus);
// - `setUnavailable(true)` fails every call with the client's UnavailableError (gRPC status 14)
//   and drops open subscriptions, until `setUnavailable(false)`.

type Stored = AllStreamRecordedEvent;

/** grpc-js status codes used here (@grpc/grpc-js `status`). */
const UNAVAILABLE = 14;
const CANCELLED = 1;

/** A gRPC ServiceError as grpc-js builds it; the client's convertToCommandError maps it by `code`. */
const serviceError = (code: number, details: string): Error =>
  Object.assign(new Error(`${code} ${code === UNAVAILABLE ? 'UNAVAILABLE' : 'CANCELLED'}: ${details}`), {
    code,
    details,
    metadata: { getMap: () => ({}) },
  });

/** The server's default max append size (EventStoreDB option MaxAppendSize, 1 MiB). */
const maxAppendSize = 1024 * 1024;
/** Default max search window of a filtered read when the client sends `count` (client 6: FilterOptions.setCount). Unverified against a server. */
const defaultSearchWindow = 32;

type Response = {
  hasEvent?: () => boolean;
  getEvent?: () => AllStreamResolvedEvent;
  hasCaughtUp?: () => boolean;
  hasCheckpoint?: () => boolean;
  getCheckpoint?: () => { getCommitPosition: () => string; getPreparePosition: () => string };
  hasStreamNotFound?: () => boolean;
  getStreamNotFound?: () => { getStreamIdentifier: () => { getStreamName: () => string } };
};
const eventResponse = (e: Stored): Response => ({
  hasEvent: () => true,
  getEvent: () => ({ event: e, commitPosition: e.position.commit }),
});

/** What the client's stream classes need from a gRPC server-streaming call. */
class FakeCall extends Readable {
  private ended = false;
  constructor(
    private readonly next: () => Response | null | 'wait',
    private readonly onClose: (c: FakeCall) => void,
  ) {
    super({ objectMode: true });
  }
  override _read(): void {
    this.pump();
  }
  /** Push what the "server" has, as far as the reader wants it; called again on append. */
  pump(): void {
    while (!this.ended) {
      const r = this.next();
      if (r === 'wait') return;
      if (r === null) {
        this.finish(null);
        return;
      }
      if (!this.push(r)) return;
    }
  }
  /** End the call as grpc-js does on a status: push(null), then 'error' unless the status is OK. */
  finish(err: Error | null): void {
    if (this.ended) return;
    this.ended = true;
    this.onClose(this);
    this.push(null);
    if (err !== null) this.emit('error', err);
  }
  /** grpc-js ClientReadableStream.cancel(): status CANCELLED "Cancelled on client", which the client ignores. */
  cancel(): void {
    this.finish(serviceError(CANCELLED, 'Cancelled on client'));
  }
}

export type FakeEsdb = Readonly<{
  client: EsdbClient;
  dropSubscriptions: () => void;
  setUnavailable: (down: boolean) => void;
  /** Open subscribeToAll calls (for tests that wait for a resubscribe). */
  subscriptionCount: () => number;
  subscribeCalls: () => number;
}>;

export function createFakeEsdb(): FakeEsdb {
  const log: Stored[] = [];
  const streams = new Map<string, Stored[]>();
  const live = new Set<FakeCall>();
  let nextPosition = 1000n;
  let unavailable = false;
  let subscribeCalls = 0;

  const down = (): Error => new UnavailableError(undefined, '14 UNAVAILABLE: emulated connection failure');
  const currentOf = (stream: string): bigint => BigInt((streams.get(stream)?.length ?? 0) - 1);

  function write(stream: string, events: readonly EventData[]): Stored[] {
    const list = streams.get(stream) ?? [];
    streams.set(stream, list);
    const out: Stored[] = [];
    for (const e of events) {
      // Positions are log byte offsets in EventStoreDB: increasing, not dense. commit = prepare
      // per event is what the adapter assumes (KurrentDB PR #2522 reports each event's own
      // prepare position over gRPC); whether every event of a multi-event append also gets its
      // own commit position is NOT verified here.
      const size = BigInt(64 + Buffer.byteLength(JSON.stringify(e.data ?? null)));
      const position: Position = { commit: nextPosition, prepare: nextPosition };
      nextPosition += size;
      const rec = {
        streamId: stream,
        id: e.id,
        isJson: e.contentType === 'application/json',
        revision: BigInt(list.length),
        type: e.type,
        created: new Date(),
        data: e.data,
        metadata: e.metadata,
        position,
      } as Stored;
      list.push(rec);
      log.push(rec);
      out.push(rec);
    }
    for (const c of live) c.pump();
    return out;
  }

  // A real server's $all starts with system events; the adapter must skip them.
  write('$stats-127.0.0.1:2113', [
    { id: randomUUID(), contentType: 'application/json', type: '$statsCollected', data: {}, metadata: undefined } as EventData,
  ]);

  /** maxCount from the stream's metadata stream (`$$<stream>`): reads see only the newest maxCount events. */
  function visible(stream: string): Stored[] {
    const list = streams.get(stream) ?? [];
    const meta = streams.get(`$$${stream}`);
    const last = meta?.[meta.length - 1]?.data as { $maxCount?: unknown } | undefined;
    // Truncation applies to reads at once, before any scavenge (EventStoreDB docs, "Stream
    // metadata": events beyond $maxCount are not returned by reads; scavenging reclaims them).
    // $all still carries them until a scavenge; the emulation never scavenges.
    return typeof last?.$maxCount === 'number' ? list.slice(Math.max(0, list.length - last.$maxCount)) : list;
  }

  // The emulated call stands in for grpc-js's ClientReadableStream<ReadResp>, and responses are
  // already-converted events (the convert function is the identity); casts only at this seam.
  type CreateCall = ConstructorParameters<typeof ReadStream>[0];
  type Convert = ConstructorParameters<typeof ReadStream<AllStreamResolvedEvent>>[1];
  const asCall =
    (call: FakeCall): CreateCall =>
    () =>
      Promise.resolve(call) as unknown as ReturnType<CreateCall>;
  const identity = ((r: unknown) => r) as unknown as Convert;

  function callFrom(responses: () => Response | null | 'wait'): FakeCall {
    const call = new FakeCall(responses, (c) => live.delete(c));
    return call;
  }

  async function appendToStream(
    stream: string,
    event: EventData | EventData[],
    options: { expectedRevision?: AppendExpectedRevision } = {},
  ): Promise<AppendResult> {
    await Promise.resolve();
    if (unavailable) throw down();
    const events = Array.isArray(event) ? event : [event];
    const expected = options.expectedRevision ?? 'any';
    const current = currentOf(stream);
    const bytes = events.reduce(
      (n, e) => n + Buffer.byteLength(JSON.stringify(e.data ?? null)) + Buffer.byteLength(JSON.stringify(e.metadata ?? null)),
      0,
    );
    if (bytes > maxAppendSize) throw new MaxAppendSizeExceededError(undefined, maxAppendSize);
    const wrong = (): Error =>
      new WrongExpectedVersionError(undefined, {
        streamName: stream,
        expected,
        current: (current < 0n ? 'no_stream' : current) as CurrentRevision,
      });
    if (expected === 'stream_exists' && current < 0n) throw wrong();
    const base = expected === 'no_stream' ? -1n : typeof expected === 'bigint' ? expected : null;
    if (base !== null && base !== current) {
      // Idempotency for an explicit expected revision: the server guarantees it for every
      // expected value except Any (eventstore Rust client docs, ExpectedRevision: "will assure
      // idempotency for all operations using any value in ExpectedRevision except Any"). The
      // same ids right after the expected revision make the append a successful no-op. The
      // result then carries no position: unverified; an adapter must not rely on it either way.
      const list = streams.get(stream) ?? [];
      const there = list.slice(Number(base + 1n), Number(base + 1n) + events.length);
      if (there.length === events.length && there.every((e, i) => e.id === events[i]!.id)) {
        return { success: true, nextExpectedRevision: base + BigInt(events.length) };
      }
      throw wrong();
    }
    // expected 'any': the server's idempotency is best effort (same docs: "will do its best ...
    // but will not guarantee"); the emulation gives none, the weakest the docs allow.
    const written = write(stream, events);
    return { success: true, nextExpectedRevision: currentOf(stream), position: written[written.length - 1]!.position };
  }

  function readStream(
    stream: string,
    options: { direction?: 'forwards' | 'backwards'; fromRevision?: ReadRevision; maxCount?: number | bigint } = {},
  ): ReadStream<AllStreamResolvedEvent> {
    const backwards = options.direction === 'backwards';
    let items: Stored[] | null = null;
    let i = 0;
    let sentNotFound = false;
    const failed = unavailable;
    const call = callFrom(() => {
      if (failed) return 'wait';
      if (items === null) {
        const list = visible(stream);
        // Reading a stream with no events fails with StreamNotFoundError (client ReadStream.js:
        // the server answers stream_not_found, the client destroys the call with the error).
        if (!streams.has(stream)) {
          if (sentNotFound) return 'wait';
          sentNotFound = true;
          return {
            hasStreamNotFound: () => true,
            getStreamNotFound: () => ({ getStreamIdentifier: () => ({ getStreamName: () => stream }) }),
          };
        }
        const from = options.fromRevision ?? (backwards ? 'end' : 'start');
        const max = Number(options.maxCount ?? Number.MAX_SAFE_INTEGER);
        const ordered = backwards ? [...list].reverse() : list;
        // fromRevision is inclusive in both directions (client docs: "Starts the read at the given event revision").
        const start =
          from === 'start' || from === 'end' ? ordered : ordered.filter((e) => (backwards ? e.revision <= from : e.revision >= from));
        items = start.slice(0, max);
      }
      const e = items[i++];
      return e === undefined ? null : eventResponse(e);
    });
    if (failed) setImmediate(() => call.finish(serviceError(UNAVAILABLE, 'emulated connection failure')));
    return new ReadStream<AllStreamResolvedEvent>(asCall(call), identity, {});
  }

  const after = (p: Position, e: Stored): boolean => e.position.commit > p.commit;
  const atOrAfter = (p: Position, e: Stored): boolean => e.position.commit >= p.commit;

  function readAll(
    options: { direction?: 'forwards' | 'backwards'; fromPosition?: ReadPosition; maxCount?: number | bigint } = {},
  ): ReadStream<AllStreamResolvedEvent> {
    const backwards = options.direction === 'backwards';
    const from = options.fromPosition ?? (backwards ? 'end' : 'start');
    const max = Number(options.maxCount ?? Number.MAX_SAFE_INTEGER);
    let items: Stored[] | null = null;
    let i = 0;
    const failed = unavailable;
    const call = callFrom(() => {
      if (failed) return 'wait';
      if (items === null) {
        const ordered = backwards ? [...log].reverse() : log;
        // A forwards read of $all from a position includes the event at that position; the
        // adapter relies on this and skips it (esdb/esdbReads.ts readAll). Backwards from a
        // position is only used from END here. Unverified for positions that are not an event's.
        const start =
          from === 'start' || from === 'end'
            ? backwards === (from === 'end')
              ? ordered
              : []
            : ordered.filter((e) => (backwards ? !atOrAfter(from, e) : atOrAfter(from, e)));
        items = start.slice(0, max);
      }
      const e = items[i++];
      return e === undefined ? null : eventResponse(e);
    });
    if (failed) setImmediate(() => call.finish(serviceError(UNAVAILABLE, 'emulated connection failure')));
    return new ReadStream<AllStreamResolvedEvent>(asCall(call), identity, {});
  }

  function subscribeToAll(options: { fromPosition?: ReadPosition; filter?: Filter } = {}): Subscription<AllStreamResolvedEvent> {
    subscribeCalls++;
    const from = options.fromPosition ?? 'start';
    const filter = options.filter;
    // Subscribing from a position delivers events *after* it (exclusive), unlike a read.
    let cursor = from === 'start' ? 0 : from === 'end' ? log.length : log.findIndex((e) => after(from, e));
    if (cursor < 0) cursor = log.length;
    let caughtUpSent = false;
    let searched = 0;
    let pendingCheckpoint: Position | null = null;
    const window = filter === undefined ? 0 : filter.checkpointInterval * (filter.maxSearchWindow ?? defaultSearchWindow);
    const matches = (e: Stored): boolean => {
      if (filter === undefined) return true;
      const subject = filter.filterOn === 'streamName' ? e.streamId : e.type;
      return 'prefixes' in filter ? filter.prefixes.some((p) => subject.startsWith(p)) : new RegExp(filter.regex).test(subject);
    };
    const failed = unavailable;
    const call = callFrom(() => {
      if (failed) return 'wait';
      for (;;) {
        if (pendingCheckpoint !== null) {
          const p = pendingCheckpoint;
          pendingCheckpoint = null;
          return {
            hasCheckpoint: () => true,
            getCheckpoint: () => ({ getCommitPosition: () => p.commit.toString(), getPreparePosition: () => p.prepare.toString() }),
          };
        }
        const e = log[cursor];
        if (e === undefined) {
          // 'caughtUp' once the subscription has sent everything stored (servers 23.10+; client 6
          // CHANGELOG: "Add support for caught up and fell behind subscription message"). Older
          // servers never send it; the adapter must not depend on it alone.
          if (!caughtUpSent) {
            caughtUpSent = true;
            return { hasCaughtUp: () => true };
          }
          return 'wait';
        }
        cursor++;
        if (matches(e)) return eventResponse(e);
        // Filtered reads report progress through skipped events as checkpoints every
        // checkpointInterval × maxSearchWindow searched events (Spear.Filter.Checkpoint docs:
        // "the EventStoreDB emits checkpoints as it reads through the events").
        if (window > 0 && ++searched >= window) {
          searched = 0;
          pendingCheckpoint = e.position;
        }
      }
    });
    live.add(call);
    if (failed) setImmediate(() => call.finish(serviceError(UNAVAILABLE, 'emulated connection failure')));
    return new Subscription<AllStreamResolvedEvent>(asCall(call), identity, {}, filter?.checkpointReached);
  }

  async function setStreamMetadata(stream: string, metadata: { maxCount?: number }): Promise<AppendResult> {
    // The client writes a `$metadata` event to `$$<stream>`, with maxCount as `$maxCount`
    // (client setStreamMetadata.js, streamMetadata.js prepareStreamMetadata).
    return appendToStream(`$$${stream}`, {
      id: randomUUID(),
      contentType: 'application/json',
      type: '$metadata',
      data: { $maxCount: metadata.maxCount },
      metadata: undefined,
    } as EventData);
  }

  const client = {
    appendToStream,
    readStream,
    readAll,
    subscribeToAll,
    setStreamMetadata,
    dispose: async () => {
      for (const c of [...live]) c.cancel();
    },
  };

  return {
    // The client's methods are generic over event types the emulation does not narrow; one cast here.
    client: client as unknown as EsdbClient,
    dropSubscriptions: () => {
      for (const c of [...live]) c.finish(serviceError(UNAVAILABLE, 'emulated subscription drop'));
    },
    setUnavailable: (d) => {
      unavailable = d;
      if (d) for (const c of [...live]) c.finish(serviceError(UNAVAILABLE, 'emulated connection failure'));
    },
    subscriptionCount: () => live.size,
    subscribeCalls: () => subscribeCalls,
  };
}
