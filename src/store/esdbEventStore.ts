import {
  BACKWARDS,
  END,
  EventStoreDBClient,
  FORWARDS,
  MaxAppendSizeExceededError,
  START,
  StreamNotFoundError,
  WrongExpectedVersionError,
  eventTypeFilter,
  jsonEvent,
  streamNameFilter,
} from '@eventstore/db-client';
import type {
  AllStreamRecordedEvent,
  AllStreamSubscription,
  AppendExpectedRevision,
  JSONType,
  Position,
  RecordedEvent,
} from '@eventstore/db-client';
import { ConvergeError, isConvergeError } from '../core/errors.ts';
import { createBackoff, retry, sleep } from '../retry.ts';
import type { Recorded } from '../core/events/index.ts';
import { decodeEvent, isEventType, rolloutStreamPrefix, streamPrefix as nodeStreamPrefix } from '../core/events/index.ts';
import { defaultMaxEventBytes, encodeWrites, expectedRevisionHolds, storeClosed, wrongExpectedRevision, recorded } from './appendRules.ts';
import type { EncodedWrite } from './appendRules.ts';
import { columnsFromReadAll } from './nodeColumns.ts';
import type { AppendResult, EventStore, ReadAllOptions, ReadStreamOptions, SubscribeOptions, Subscription } from './port.ts';

// EventStoreDB adapter (DESIGN §5): for fleets that outgrow one machine. Differences from the
// SQLite adapter, all documented in docs/store.md:
// - a many-stream append is concurrent per-stream appends: atomic per stream, not per call
//   (EventStoreDB has no cross-stream transaction);
// - the global position is the commit position of $all (commit = prepare for gRPC appends);
// - event-id idempotency is what the server gives for explicit expected revisions, plus a check
//   of the stream's tail on a conflict; an id reused in *another* stream is not detected;
// - events in $all that are not Converge events (system events, other applications) are skipped.

export type EsdbEventStoreOptions = Readonly<{
  maxEventBytes?: number;
  /**
   * Streams the live subscription follows (server-side filter). Default: Converge's own, `node-`
   * (DESIGN §2) and `rollout-` (issue 14).
   */
  streamPrefix?: string;
  readBatchSize?: number;
  /** Backoff bounds when a subscription drops and resubscribes (ms). */
  minBackoffMs?: number;
  maxBackoffMs?: number;
  /**
   * Test seam: use this client instead of one built from the connection string (the conformance
   * suite runs the adapter over an emulated client, test/contracts/fakeEsdbClient.ts). The store
   * disposes it on close.
   */
  client?: EsdbClient;
}>;

/** The part of `EventStoreDBClient` this adapter calls. */
export type EsdbClient = Pick<
  EventStoreDBClient,
  'appendToStream' | 'readStream' | 'readAll' | 'subscribeToAll' | 'setStreamMetadata' | 'dispose'
>;

// Not `$`-prefixed: streams starting with `$` are system streams that EventStoreDB's default
// ACL ($systemStreamAcl) lets only admins read or write, and the engine need not run as admin.
// The name is outside the `node-` category, so reads and subscriptions never see checkpoints.
const checkpointStream = (name: string): string => `converge-checkpoint-${name}`;
const toPosition = (p: bigint): Position => ({ commit: p, prepare: p });

/**
 * gRPC's text, made one plain sentence (issue 9 §4): `14 UNAVAILABLE: No connection established.
 * Last error: Error: connect ECONNREFUSED 127.0.0.1:1. Resolution note: ` becomes `EventStoreDB
 * unavailable: no connection established (connect ECONNREFUSED 127.0.0.1:1)`. The status prefix
 * repeats the error's type, and grpc-js appends a resolution note even when it has none.
 */
export function grpcText(message: string): string {
  const status = /^\d+ ([A-Z_]+): /.exec(message);
  let text = message
    .slice(status?.[0].length ?? 0)
    .replace(/\.?\s*Resolution note:\s*$/, '')
    .replace(/\bError: /g, '')
    .trim();
  const lastError = /^No connection established\.? Last error: (.*?)\.?$/.exec(text);
  if (lastError !== null) text = `no connection established (${lastError[1]})`;
  return status === null ? text : `EventStoreDB ${status[1]!.toLowerCase().replace(/_/g, ' ')}: ${text}`;
}

const esdbError = (err: unknown, what: string): ConvergeError => {
  if (err instanceof ConvergeError) return err;
  if (err instanceof MaxAppendSizeExceededError) {
    return new ConvergeError('CONVERGE_ERR_EVENT_TOO_LARGE', `${what}: EventStoreDB refused the append as too large (${err.message})`, {
      cause: err,
    });
  }
  return new ConvergeError('CONVERGE_ERR_STORE_UNAVAILABLE', `${what}: ${grpcText(err instanceof Error ? err.message : String(err))}`, {
    cause: err,
  });
};

function toRecorded(e: RecordedEvent | AllStreamRecordedEvent): Recorded | null {
  if (!isEventType(e.type) || !e.isJson || e.position === undefined) return null;
  return recorded(decodeEvent(e.type, e.data, e.metadata), e.id, e.streamId, e.revision, e.position.commit);
}

export function createEsdbEventStore(connectionString: string, options: EsdbEventStoreOptions = {}): EventStore {
  const maxEventBytes = options.maxEventBytes ?? defaultMaxEventBytes;
  const prefixes = options.streamPrefix === undefined ? [nodeStreamPrefix, rolloutStreamPrefix] : [options.streamPrefix];
  const followed = (stream: string): boolean => prefixes.some((p) => stream.startsWith(p));
  const readBatchSize = options.readBatchSize ?? 1000;
  const backoff = { minMs: options.minBackoffMs ?? 100, maxMs: options.maxBackoffMs ?? 10_000 };
  let client: EsdbClient;
  try {
    client = options.client ?? EventStoreDBClient.connectionString(connectionString);
  } catch (err) {
    throw new ConvergeError(
      'CONVERGE_ERR_CONFIG_INVALID',
      `esdb: cannot use connection string: ${err instanceof Error ? err.message : String(err)}`,
      { cause: err },
    );
  }
  let closed = false;
  const subscriptions = new Set<Subscription>();
  const open = (): void => {
    if (closed) throw storeClosed('esdb');
  };

  /** Events of a stream from a revision, forwards or backwards; a missing stream has none. */
  async function readRaw(
    stream: string,
    direction: 'forwards' | 'backwards',
    from: bigint | undefined,
    maxCount: number | undefined,
  ): Promise<RecordedEvent[]> {
    const out: RecordedEvent[] = [];
    try {
      const read = client.readStream(stream, {
        direction: direction === 'backwards' ? BACKWARDS : FORWARDS,
        fromRevision: from ?? (direction === 'backwards' ? END : START),
        ...(maxCount === undefined ? {} : { maxCount }),
      });
      for await (const r of read) if (r.event !== undefined) out.push(r.event as RecordedEvent);
    } catch (err) {
      if (err instanceof StreamNotFoundError) return [];
      throw esdbError(err, `read ${stream}`);
    }
    return out;
  }

  const currentRevision = async (stream: string): Promise<bigint> => (await readRaw(stream, 'backwards', undefined, 1))[0]?.revision ?? -1n;

  /** One stream's write, with the port's idempotency: already-stored ids are skipped, never duplicated. */
  async function appendOne(w: EncodedWrite): Promise<{ stream: string; nextExpected: bigint; written: number; position: bigint | null }> {
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
      // A retry of a write that did land: its events sit right after the revision it expected.
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
  }

  const store: EventStore = {
    kind: 'esdb',

    async append(writes) {
      open();
      const encoded = encodeWrites(writes, maxEventBytes);
      // No cross-stream transaction in EventStoreDB: streams are written concurrently, writes to
      // the same stream one after another in call order. Atomic per stream, not per call.
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
    },

    async readStream(stream, opts: ReadStreamOptions = {}) {
      open();
      const raw = await readRaw(stream, opts.direction ?? 'forwards', opts.fromRevision, opts.limit);
      return raw.map(toRecorded).filter((e): e is Recorded => e !== null);
    },

    async *readAll(opts: ReadAllOptions = {}) {
      let after = opts.after ?? null;
      let left = opts.limit ?? Number.MAX_SAFE_INTEGER;
      while (left > 0) {
        open();
        const batch: Recorded[] = [];
        let raw = 0;
        let last: bigint | null = null;
        try {
          const read = client.readAll({
            direction: FORWARDS,
            fromPosition: after === null ? START : toPosition(after),
            maxCount: readBatchSize,
          });
          for await (const r of read) {
            raw++;
            const e = r.event;
            if (e === undefined) continue;
            last = e.position.commit;
            // fromPosition is inclusive in a read; the port's `after` is exclusive.
            if (after !== null && e.position.commit <= after) continue;
            if (opts.streamPrefix !== undefined && !e.streamId.startsWith(opts.streamPrefix)) continue;
            const rec = toRecorded(e);
            if (rec !== null && batch.length < left) batch.push(rec);
          }
        } catch (err) {
          throw esdbError(err, 'read $all');
        }
        if (batch.length > 0) {
          left -= batch.length;
          yield batch;
        }
        if (raw < readBatchSize || last === null || last === after) return;
        after = last;
      }
    },

    // The definition (nodeColumns.ts). `this`, not the store: a wrapper that replaces readAll
    // (`{ ...store, readAll }`) has its own readAll read, as readNodeColumns always did.
    readColumns(opts) {
      return columnsFromReadAll(this, opts);
    },

    async headPosition() {
      open();
      try {
        // The newest Converge event; system events after it do not count.
        for await (const r of client.readAll({ direction: BACKWARDS, fromPosition: END, maxCount: 4096 })) {
          if (r.event !== undefined && isEventType(r.event.type)) return r.event.position.commit;
        }
      } catch (err) {
        throw esdbError(err, 'read $all');
      }
      return null;
    },

    subscribe(opts) {
      open();
      const sub = createEsdbSubscription(opts);
      subscriptions.add(sub);
      return sub;
    },

    async getCheckpoint(name) {
      open();
      const last = (await readRaw(checkpointStream(name), 'backwards', undefined, 1))[0];
      if (last === undefined) return null;
      const p = (last.data as { position?: unknown }).position;
      return typeof p === 'string' ? BigInt(p) : null;
    },

    async setCheckpoint(name, position) {
      open();
      const stream = checkpointStream(name);
      try {
        const r = await client.appendToStream(stream, jsonEvent({ type: 'ConvergeCheckpoint', data: { position: position.toString() } }));
        // Only the newest checkpoint matters: let the server scavenge the rest.
        if (r.nextExpectedRevision === 0n) await client.setStreamMetadata(stream, { maxCount: 1 });
      } catch (err) {
        throw esdbError(err, `save checkpoint ${name}`);
      }
    },

    async close() {
      if (closed) return;
      closed = true;
      await Promise.allSettled([...subscriptions].map((s) => s.stop()));
      await client.dispose();
    },
  };

  function createEsdbSubscription(opts: SubscribeOptions): Subscription {
    const abort = new AbortController();
    const signal = abort.signal;
    const batchSize = Math.max(1, opts.batchSize ?? 500);
    const types = opts.types === undefined ? null : new Set<string>(opts.types);
    let position: bigint | null = null;
    let caughtUp = false;
    let current: AllStreamSubscription | null = null;
    let head: bigint | null = null;

    const report = (err: unknown): void => {
      try {
        opts.onError?.(err);
      } catch {
        // a reporter that throws must not kill the subscription
      }
    };
    const markCaughtUp = (): void => {
      if (caughtUp) return;
      caughtUp = true;
      try {
        opts.onCaughtUp?.();
      } catch (err) {
        report(err);
      }
    };
    const passed = (p: bigint): void => {
      if (head !== null && p >= head) markCaughtUp();
    };
    // The server's 'caughtUp' message and filter checkpoints reach the client's stream ahead of
    // the events still buffered in it (the client emits them from its Transform, up to a
    // highWaterMark of events before the consumer). They count only once everything received
    // before them has been handed to the handler: nothing in hand, nothing buffered.
    let inHand = 0;
    let serverCaughtUp = false;
    let serverCheckpoint: bigint | null = null;
    const settle = (s: AllStreamSubscription): void => {
      if (inHand > 0 || s.readableLength > 0) return;
      if (serverCaughtUp) markCaughtUp();
      if (serverCheckpoint !== null) passed(serverCheckpoint);
    };

    const retrying = async (fn: () => Promise<void>): Promise<boolean> =>
      (
        await retry(fn, {
          ...backoff,
          signal,
          onError: (err) => {
            if (isConvergeError(err, 'CONVERGE_ERR_STORE_CLOSED')) return false;
            report(err);
            return true;
          },
        })
      ).ok;

    async function flush(batch: Recorded[]): Promise<boolean> {
      const last = batch[batch.length - 1];
      if (last === undefined) return true;
      const wanted = types === null ? batch : batch.filter((e) => types.has(e.type));
      if (wanted.length > 0 && !(await retrying(async () => opts.handler(wanted)))) return false;
      position = last.position;
      if (opts.checkpoint !== undefined) {
        const name = opts.checkpoint;
        if (signal.aborted) await store.setCheckpoint(name, last.position).catch(report);
        else if (!(await retrying(() => store.setCheckpoint(name, last.position)))) return false;
      }
      passed(last.position);
      return true;
    }

    async function run(): Promise<void> {
      const started = await retrying(async () => {
        const saved = opts.checkpoint === undefined ? null : await store.getCheckpoint(opts.checkpoint);
        position = saved ?? opts.after ?? null;
        head = await store.headPosition();
      });
      if (!started) return;
      if (head === null || (position !== null && position >= head)) markCaughtUp();
      const delays = createBackoff(backoff);
      while (!signal.aborted && !closed) {
        try {
          // Resubscribe from the last handled position: events are skipped by position below,
          // so a drop replays nothing to the handler and skips nothing.
          inHand = 0;
          serverCaughtUp = false;
          serverCheckpoint = null;
          const checkpointReached = (s: AllStreamSubscription, p: Position): void => {
            serverCheckpoint = p.commit;
            settle(s);
          };
          // A type filter is applied by the server (SubscribeOptions.types): the relay is sent the
          // declarations only. The server filters on one thing, so the stream prefix is then
          // checked here.
          const sub = client.subscribeToAll({
            fromPosition: position === null ? START : toPosition(position),
            filter:
              types === null
                ? streamNameFilter({ prefixes, checkpointReached })
                : eventTypeFilter({ prefixes: [...types], checkpointReached }),
          });
          current = sub;
          sub.on('caughtUp', () => {
            serverCaughtUp = true;
            settle(sub);
          });
          let batch: Recorded[] = [];
          for await (const r of sub) {
            if (signal.aborted) break;
            delays.reset();
            inHand++;
            const e = r.event;
            const rec = e === undefined || !followed(e.streamId) ? null : toRecorded(e);
            if (rec === null || (position !== null && rec.position <= position)) {
              inHand--;
              if (batch.length === 0) settle(sub);
              continue;
            }
            batch.push(rec);
            // Hand over what has arrived: a full batch, or whatever is buffered once the stream pauses.
            if (batch.length >= batchSize || sub.readableLength === 0) {
              const b = batch;
              batch = [];
              const ok = await flush(b);
              inHand -= b.length;
              if (!ok) break;
              settle(sub);
            }
          }
          if (batch.length > 0) await flush(batch);
          if (signal.aborted) break;
          throw new ConvergeError('CONVERGE_ERR_STORE_UNAVAILABLE', 'esdb: subscription to $all ended');
        } catch (err) {
          if (signal.aborted || closed) break;
          report(esdbError(err, 'subscribe to $all'));
          await sleep(delays.next(), signal);
        } finally {
          const sub = current;
          current = null;
          await sub?.unsubscribe().catch(() => undefined);
        }
      }
    }

    const done = run().catch(report);
    const sub: Subscription = {
      position: () => position,
      isCaughtUp: () => caughtUp,
      stop: async () => {
        abort.abort();
        await current?.unsubscribe().catch(() => undefined);
        await done;
        subscriptions.delete(sub);
      },
    };
    return sub;
  }

  return store;
}
