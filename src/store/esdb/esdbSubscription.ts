import { START, eventTypeFilter, streamNameFilter } from '@eventstore/db-client';
import type { AllStreamSubscription, Position } from '@eventstore/db-client';
import { ConvergeError, isConvergeError } from '../../core/errors.ts';
import type { Recorded } from '../../core/events/index.ts';
import { createBackoff, retry, sleep } from '../../retry.ts';
import type { EventStore, SubscribeOptions, Subscription } from '../port.ts';
import type { EsdbClient } from './esdbClient.ts';
import { esdbError } from './esdbErrors.ts';
import { toPosition, toRecorded } from './esdbReads.ts';

// The EventStoreDB store's subscription: a server-side subscription to $all, filtered by stream
// prefix (or by event type), handed to the handler in batches, resubscribed with backoff from
// the last handled position when it drops.

export type EsdbSubscriptionDeps = Readonly<{
  client: EsdbClient;
  store: Pick<EventStore, 'getCheckpoint' | 'setCheckpoint' | 'headPosition'>;
  /** The streams followed (server-side filter). */
  prefixes: readonly string[];
  backoff: Readonly<{ minMs: number; maxMs: number }>;
  isClosed: () => boolean;
  onStopped: (sub: Subscription) => void;
}>;

export function createEsdbSubscription(deps: EsdbSubscriptionDeps, opts: SubscribeOptions): Subscription {
  const { client, store, prefixes, backoff } = deps;
  const followed = (stream: string): boolean => prefixes.some((p) => stream.startsWith(p));
  const abort = new AbortController();
  const signal = abort.signal;
  const batchSize = Math.max(1, opts.batchSize ?? 500);
  const types = opts.types === undefined ? null : new Set<string>(opts.types);
  let position: bigint | null = null;
  let current: AllStreamSubscription | null = null;

  const report = (err: unknown): void => {
    try {
      opts.onError?.(err);
    } catch {
      // a reporter that throws must not kill the subscription
    }
  };
  const catchUp = createCatchUp(opts, report);
  const retrying = retryingWith(backoff, signal, report);

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
    catchUp.passed(last.position);
    return true;
  }

  /** Follow $all from `position` until the subscription drops (throws) or is stopped. */
  async function follow(delays: { reset: () => void }): Promise<void> {
    // Resubscribe from the last handled position: events are skipped by position below,
    // so a drop replays nothing to the handler and skips nothing.
    catchUp.begin();
    const checkpointReached = (s: AllStreamSubscription, p: Position): void => catchUp.checkpointReached(s, p.commit);
    // A type filter is applied by the server (SubscribeOptions.types): the relay is sent the
    // declarations only. The server filters on one thing, so the stream prefix is then
    // checked here.
    const sub = client.subscribeToAll({
      fromPosition: position === null ? START : toPosition(position),
      filter:
        types === null
          ? streamNameFilter({ prefixes: [...prefixes], checkpointReached })
          : eventTypeFilter({ prefixes: [...types], checkpointReached }),
    });
    current = sub;
    sub.on('caughtUp', () => catchUp.serverCaughtUp(sub));
    let batch: Recorded[] = [];
    for await (const r of sub) {
      if (signal.aborted) break;
      delays.reset();
      catchUp.arrived();
      const e = r.event;
      const rec = e === undefined || !followed(e.streamId) ? null : toRecorded(e);
      if (rec === null || (position !== null && rec.position <= position)) {
        catchUp.skipped(sub, batch.length === 0);
        continue;
      }
      batch.push(rec);
      // Hand over what has arrived: a full batch, or whatever is buffered once the stream pauses.
      if (batch.length >= batchSize || sub.readableLength === 0) {
        const b = batch;
        batch = [];
        const ok = await flush(b);
        catchUp.handed(b.length);
        if (!ok) break;
        catchUp.settle(sub);
      }
    }
    if (batch.length > 0) await flush(batch);
    if (signal.aborted) return;
    throw new ConvergeError('CONVERGE_ERR_STORE_UNAVAILABLE', 'esdb: subscription to $all ended');
  }

  async function run(): Promise<void> {
    let head: bigint | null = null;
    const started = await retrying(async () => {
      const saved = opts.checkpoint === undefined ? null : await store.getCheckpoint(opts.checkpoint);
      position = saved ?? opts.after ?? null;
      head = await store.headPosition();
    });
    if (!started) return;
    catchUp.start(head, position);
    const delays = createBackoff(backoff);
    while (!signal.aborted && !deps.isClosed()) {
      try {
        await follow(delays);
        if (signal.aborted) break;
      } catch (err) {
        if (signal.aborted || deps.isClosed()) break;
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
    isCaughtUp: catchUp.isCaughtUp,
    stop: async () => {
      abort.abort();
      await current?.unsubscribe().catch(() => undefined);
      await done;
      deps.onStopped(sub);
    },
  };
  return sub;
}

/** `fn` retried with backoff: true once it succeeds, false once the store is closed or `signal` aborts; each failure reported. */
function retryingWith(
  backoff: EsdbSubscriptionDeps['backoff'],
  signal: AbortSignal,
  report: (err: unknown) => void,
): (fn: () => Promise<void>) => Promise<boolean> {
  return async (fn) =>
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
}

/**
 * When the subscription has caught up. The server's 'caughtUp' message and filter checkpoints
 * reach the client's stream ahead of the events still buffered in it (the client emits them from
 * its Transform, up to a highWaterMark of events before the consumer). They count only once
 * everything received before them has been handed to the handler: nothing in hand, nothing buffered.
 */
function createCatchUp(opts: SubscribeOptions, report: (err: unknown) => void) {
  let caughtUp = false;
  let head: bigint | null = null;
  let inHand = 0;
  let serverCaughtUp = false;
  let serverCheckpoint: bigint | null = null;

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
  const settle = (s: AllStreamSubscription): void => {
    if (inHand > 0 || s.readableLength > 0) return;
    if (serverCaughtUp) markCaughtUp();
    if (serverCheckpoint !== null) passed(serverCheckpoint);
  };
  return {
    isCaughtUp: (): boolean => caughtUp,
    /** The head when the subscription started, and where it starts from. */
    start(h: bigint | null, from: bigint | null): void {
      head = h;
      if (head === null || (from !== null && from >= head)) markCaughtUp();
    },
    /** A new server subscription: what the last one said no longer counts. */
    begin(): void {
      inHand = 0;
      serverCaughtUp = false;
      serverCheckpoint = null;
    },
    arrived(): void {
      inHand++;
    },
    /** An event not handed over; `idle`: none waits in the batch either. */
    skipped(s: AllStreamSubscription, idle: boolean): void {
      inHand--;
      if (idle) settle(s);
    },
    handed(n: number): void {
      inHand -= n;
    },
    settle,
    passed,
    serverCaughtUp(s: AllStreamSubscription): void {
      serverCaughtUp = true;
      settle(s);
    },
    checkpointReached(s: AllStreamSubscription, p: bigint): void {
      serverCheckpoint = p;
      settle(s);
    },
  };
}
