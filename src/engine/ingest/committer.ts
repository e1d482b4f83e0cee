import type { Logger } from 'pino';
import { ConvergeError, toConvergeError } from '../../core/errors.ts';
import type { ErrorCode } from '../../core/errors.ts';
import { streamOf } from '../../core/events/index.ts';
import type { NodeEvent } from '../../core/events/index.ts';
import type { Metrics } from '../../metrics.ts';
import { retry } from '../../retry.ts';
import type { AppendPipeline, AppendResult, EventStore, NewEvent, StreamWrite } from '../../store/port.ts';
import type { Delivery, IngestSource } from '../../transport/port.ts';
import type { ComponentHealth } from '../health.ts';
import type { Backoff, IngestCounts } from './options.ts';

// A batch of deliveries into the store, and only then acked: nothing is acked before it is
// durable. Three paths. The pipelined one (a store with EventStore.pipeline) appends a batch and
// acks it once its commit is on disk, while the next batch is appended. The retrying one appends
// and waits, holding the deliveries unacked while the store is unavailable (ingest is unhealthy
// meanwhile). A batch the store refuses as a whole, for an event no retry will fix, is written one
// delivery at a time to find the one to dead-letter.

/**
 * A delivery and its event (null: nothing to store, an alive from a node already heard). A
 * liveness transition of the engine's own (a node heard by a report, or gone silent) has no
 * delivery: it rides in the same batches so a node's events keep their order in its stream.
 */
export type Pending = Readonly<{ delivery: Delivery | null; event: NewEvent<NodeEvent> | null }>;

const deliveriesOf = (batch: readonly Pending[]): Delivery[] => {
  const out: Delivery[] = [];
  for (const p of batch) if (p.delivery !== null) out.push(p.delivery);
  return out;
};

export type Committer = Readonly<{
  /** Store the batch and ack it (perhaps later, once synced); false if stopped with the store down, the batch left unacked. */
  write: (batch: readonly Pending[]) => Promise<boolean>;
  /** Wait for every batch waiting for its sync; false if one was left unacked. */
  settle: () => Promise<boolean>;
  isHealthy: () => boolean;
  /** Health of the appends; `pending` counts the deliveries in an append or waiting for its sync. */
  health: () => ComponentHealth & { pending: number };
}>;

export type CommitterOptions = Readonly<{
  store: EventStore;
  source: IngestSource;
  logger: Logger;
  metrics: Metrics | undefined;
  now: () => Date;
  backoff: Backoff;
  /** Aborted at stop: an append still failing is given up and its batch left unacked. */
  signal: AbortSignal;
  counts: IngestCounts;
  /** Dead-letter a delivery whose event the store refuses for good. */
  refuse: (d: Delivery, err: unknown) => void;
  /** Told of each batch once its events are durable (the report traces end there). */
  onAppended?: (batch: readonly Pending[]) => void;
}>;

/** Batches appended through the store's pipeline and not yet acked, at once; the broker's prefetch bounds them too. */
const maxSyncing = 4;

/** Store errors that no retry will fix: the delivery itself is the problem. */
const poisonCodes: ReadonlySet<ErrorCode> = new Set([
  'CONVERGE_ERR_EVENT_TOO_LARGE',
  'CONVERGE_ERR_DUPLICATE_EVENT_ID',
  'CONVERGE_ERR_EVENT_INVALID',
]);

/** The batch's events as one write per node stream, in the order the nodes first appear. */
export function writesOf(batch: readonly Pending[]): StreamWrite[] {
  // Grouped by node, the stream name made once per group: a name per event was a new string,
  // flattened and hashed again by the Map (the same groups, in the same order: streamOf is one-to-one).
  const byNode = new Map<string, NewEvent[]>();
  for (const { event } of batch) {
    if (event === null) continue;
    const node = event.data.node;
    const list = byNode.get(node);
    // `[event]`, not `[]` then push: a push into an empty array gives it room for 17, and most
    // groups hold one event.
    if (list === undefined) byNode.set(node, [event]);
    else list.push(event);
  }
  // 'any': reports and alive never conflict with sends; ids make retries no-ops.
  const writes: StreamWrite[] = [];
  for (const [node, events] of byNode) writes.push({ stream: streamOf(node), expected: 'any', events });
  return writes;
}

export function createCommitter(options: CommitterOptions): Committer {
  const { store, source, logger, metrics, now, backoff, signal, counts, refuse } = options;
  let healthy = true;
  let lastAppendAt: Date | null = null;
  let failingSince: Date | null = null;
  let lastError: string | null = null;
  /** Deliveries in the batch being appended on the retrying path. */
  let committing = 0;
  /**
   * Batches appended through the store's pipeline and waiting for their commit to be on disk,
   * oldest first; each settles once acked (true) or left unacked at stop (false).
   * `syncingDeliveries` counts their deliveries.
   */
  let syncing: Promise<boolean>[] = [];
  let syncingDeliveries = 0;
  /** The pipeline batches go through; dropped once one of its appends failed, and made again when nothing waits on it. */
  let pipe: AppendPipeline | null = null;
  let batchSeq = 0;
  metrics?.ingestHealthy.set(1);

  async function settle(): Promise<boolean> {
    const all = await Promise.all(syncing);
    return all.every((ok) => ok);
  }

  /** The bookkeeping of a batch whose events are durably stored (result null: it had none), then its ack. */
  function appended(batch: readonly Pending[], writes: readonly StreamWrite[], result: AppendResult | null, log?: () => Logger): void {
    if (result !== null) {
      if (!healthy) (log?.() ?? logger).info({}, 'store writable again; resuming acks');
      healthy = true;
      failingSince = null;
      lastError = null;
      lastAppendAt = now();
      metrics?.ingestHealthy.set(1);
      // Skipped duplicates (redeliveries) are not appended; count the written tail by type, one
      // metric update per type and batch rather than per event.
      const byType = new Map<string, number>();
      result.streams.forEach((st, i) => {
        const events = writes[i]?.events ?? [];
        for (let j = events.length - st.written; j < events.length; j++)
          byType.set(events[j]!.type, (byType.get(events[j]!.type) ?? 0) + 1);
        counts.appended += st.written;
      });
      if (metrics !== undefined) for (const [type, n] of byType) metrics.eventsAppended.inc({ type }, n);
    }
    options.onAppended?.(batch);
    const deliveries = deliveriesOf(batch);
    source.ack(deliveries);
    counts.acked += deliveries.length;
  }

  /**
   * Append the batch through the store's pipeline and ack it once its commit is on disk, without
   * waiting for that here: the next batch is appended while this one is committed and synced, and
   * shares the sync. Acks stay in append order. An append that fails takes the retrying path once
   * the batches before it are settled; the pipeline refuses every later append untried, so those
   * take it too, in order, and a new pipeline is started only once all of them have settled. At
   * most `maxSyncing` batches wait; past that, the oldest is waited for.
   */
  async function commitPipelined(batch: readonly Pending[]): Promise<boolean> {
    const writes = writesOf(batch);
    if (pipe === null) {
      if (!(await settle())) return false;
      pipe = store.pipeline!();
    }
    const used = pipe;
    const append = writes.length === 0 ? null : used.append(writes);
    // Looked at below, after the batches before it: handled now, so it is not an unhandled rejection meanwhile.
    const outcome = append?.then(
      (result) => result,
      () => {
        if (pipe === used) pipe = null;
        return false as const;
      },
    );
    const before = syncing[syncing.length - 1] ?? Promise.resolve(true);
    syncingDeliveries += batch.length;
    const done = (async (): Promise<boolean> => {
      const result = outcome === undefined ? null : await outcome;
      // In append order: the batch before is acked (or given up) first.
      const earlier = await before;
      syncingDeliveries -= batch.length;
      if (result === false || !earlier) return commit(batch);
      appended(batch, writes, result);
      return true;
    })().catch((err: unknown) => {
      // Not expected (the retrying path settles its own errors); the batch stays unacked, as at stop.
      logger.error({ err: (err as Error).message }, 'a synced batch could not be acked; its deliveries stay unacked');
      return false;
    });
    syncing.push(done);
    void done.then(() => {
      syncing = syncing.filter((p) => p !== done);
    });
    while (syncing.length > maxSyncing) if (!(await syncing[0]!)) return false;
    return true;
  }

  /** Note a failed append: the first of a run makes ingest unhealthy. True: worth retrying. */
  function failed(err: unknown, log: () => Logger): boolean {
    const e = toConvergeError(err, 'CONVERGE_ERR_STORE_UNAVAILABLE');
    if (poisonCodes.has(e.code) || e.code === 'CONVERGE_ERR_STORE_CLOSED') return false;
    if (healthy) {
      log().error({ code: e.code, err: e.message }, 'store append failed; holding deliveries unacked and retrying');
      failingSince = now();
      metrics?.ingestHealthy.set(0);
    }
    healthy = false;
    lastError = `${e.code}: ${e.message}`;
    return true;
  }

  /** Append the batch's events (retrying while the store is down), then ack it. False if stopped first. */
  async function commit(batch: readonly Pending[]): Promise<boolean> {
    // Made only when there is something to log: a pino child per batch showed in the profile.
    const seq = ++batchSeq;
    let batchLog: Logger | null = null;
    const log = (): Logger => (batchLog ??= logger.child({ batch: seq, size: batch.length }));
    const writes = writesOf(batch);
    if (writes.length === 0) {
      appended(batch, writes, null, log);
      return true;
    }
    committing = batch.length;
    const r = await retry(() => store.append(writes), { ...backoff, signal, onError: (err) => failed(err, log) });
    committing = 0;
    if (!r.ok) {
      const e = toConvergeError(
        r.error ?? new ConvergeError('CONVERGE_ERR_STORE_CLOSED', 'ingest stopped'),
        'CONVERGE_ERR_STORE_UNAVAILABLE',
      );
      if (poisonCodes.has(e.code)) return commitOneByOne(batch, log);
      log().warn({ code: e.code }, 'stopping with a batch unwritten; its deliveries stay unacked');
      return false;
    }
    appended(batch, writes, r.value, log);
    return true;
  }

  /** A batch the store refused as a whole: find the one delivery to blame, write the rest. */
  async function commitOneByOne(batch: readonly Pending[], log: () => Logger): Promise<boolean> {
    for (const p of batch) {
      if (p.event === null) {
        if (p.delivery !== null) {
          source.ack([p.delivery]);
          counts.acked++;
        }
        continue;
      }
      try {
        // Written 0: a duplicate of an event stored already (the repeat that got the batch refused).
        const written = (await store.append(writesOf([p]))).streams[0]?.written ?? 0;
        if (written > 0) metrics?.eventsAppended.inc({ type: p.event.type });
        counts.appended += written;
        if (p.delivery !== null) {
          source.ack([p.delivery]);
          counts.acked++;
        }
      } catch (err) {
        const e = toConvergeError(err, 'CONVERGE_ERR_STORE_UNAVAILABLE');
        if (poisonCodes.has(e.code)) {
          if (p.delivery !== null) refuse(p.delivery, e);
          else log().error({ code: e.code, type: p.event.type, node: p.event.data.node }, 'the store refused a liveness transition');
        } else {
          // Transient after all: the rest goes back through the retrying path.
          log().warn({ code: e.code }, 'store failed while isolating a poison event');
          return commit(batch.slice(batch.indexOf(p)));
        }
      }
    }
    return true;
  }

  return {
    write: (batch) => (store.pipeline === undefined ? commit(batch) : commitPipelined(batch)),
    settle,
    isHealthy: () => healthy,
    health: () => ({ healthy, lastSuccessAt: lastAppendAt, failingSince, error: lastError, pending: committing + syncingDeliveries }),
  };
}
