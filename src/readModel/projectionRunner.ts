import { ConvergeError } from '../core/errors.ts';
import { sleep } from '../retry.ts';
import { nextTurn } from '../turnBudget.ts';
import type { Logger } from 'pino';
import { livenessStates, nodeStatuses } from '../../projections/index.ts';
import { readNodeColumns } from '../store/index.ts';
import { unreadableEventOf } from '../store/decodeStored.ts';
import type { UnreadableEvent } from '../store/decodeStored.ts';
import type { EventStore, Subscription } from '../store/index.ts';
import type { Metrics } from '../metrics.ts';
import { createReadModel } from './readModel.ts';
import type { FoldFailure, ReadModel } from './readModel.ts';
import { createRolloutView } from './rollouts.ts';
import type { RolloutView } from './rollouts.ts';
import { createSnapshotKeeper } from './snapshotKeeper.ts';
import type { SnapshotOptions } from './snapshotKeeper.ts';
import { nodeOfStream } from '../core/events/index.ts';
import type { Recorded } from '../core/events/index.ts';
import { attr, eventKey, tracer } from '../tracing/index.ts';
import type { Span } from '../tracing/index.ts';

// The projection runner (docs/design.md §6): folds the store into the read model through one
// subscription. The read model lives in memory, so the subscription's resume point is the
// snapshot's position (or zero), not a store checkpoint: a checkpoint saved without the state it
// stands for would make a restarted engine skip events it no longer holds.

export type ProjectionRunnerOptions = Readonly<{
  store: EventStore;
  logger: Logger;
  metrics?: Metrics;
  readModel?: ReadModel;
  snapshot?: SnapshotOptions;
  batchSize?: number;
  graceMs?: number;
  /**
   * How a start with nothing restored folds the store: 'bulk' (default) catches up through the read
   * model's draft fold (ReadModel.catchUp) while it can, then per event; 'per-event' folds every
   * event through `apply`, the path that stays live afterwards (`replay --verify` checks that one).
   */
  catchUp?: 'bulk' | 'per-event';
  /**
   * For a start with no snapshot restored on a store that moved history to its archive (docs/operations.md
   * "Retention and archive"): the store with the archive merged into its reads, for the cold fold only.
   * Without it such a start refuses to fold, rather than fold the hot rows alone into wrong states.
   */
  coldStore?: () => Promise<EventStore>;
  /** How long a /metrics scrape waits for the store's head before it answers with the lag it last had (ms; default 500). */
  scrapeWaitMs?: number;
  /** Clock for liveness in the node gauges (tests inject one). */
  now?: () => number;
  /**
   * The ingest's exact last-seen time (alive is coalesced in the store, docs/design.md §2), so the
   * node gauges count liveness as the API reports it rather than by the coarser folded time.
   */
  lastSeen?: (node: string) => Date | null;
}>;

export type ProjectionRunner = Readonly<{
  readModel: ReadModel;
  /** Every rollout folded beside the read model, with how its nodes stand. */
  rollouts: RolloutView;
  /** Restore the snapshot (if any, and valid) and start following the store. */
  start: () => Promise<void>;
  /** Resolves once the runner has folded everything stored when it started; rejects if a fold fails first. */
  caughtUp: () => Promise<void>;
  /** Caught up and not stopped by a failed fold. */
  isReady: () => boolean;
  /** The event a fold failed on: projections stopped there, or null. */
  failure: () => FoldFailure | null;
  /** Events in the store not yet folded. */
  lag: () => Promise<bigint>;
  /** Refresh the lag and node gauges (called on every /metrics scrape: liveness depends on now). */
  refreshMetrics: (now?: number) => Promise<void>;
  /**
   * Write a snapshot of the current read model now (if snapshots are configured); given up, the
   * previous one left in place and a warn logged, if it is not written within `withinMs`.
   */
  writeSnapshot: (withinMs?: number) => Promise<void>;
  stop: () => Promise<void>;
}>;

export function createProjectionRunner(options: ProjectionRunnerOptions): ProjectionRunner {
  const { store, logger, metrics } = options;
  const readModel =
    options.readModel ??
    createReadModel({
      ...(options.graceMs === undefined ? {} : { graceMs: options.graceMs }),
      ...(options.lastSeen === undefined ? {} : { lastSeen: options.lastSeen }),
      ...(options.now === undefined ? {} : { now: options.now }),
    });
  // Listens to the read model from here on, so it sees every event the runner folds.
  const rollouts = createRolloutView(readModel, {
    ...(options.graceMs === undefined ? {} : { graceMs: options.graceMs }),
    ...(options.lastSeen === undefined ? {} : { lastSeen: options.lastSeen }),
  });
  const log = logger.child({ component: 'projections' });
  const snapshots = createSnapshotKeeper({ store, readModel, rollouts, log, metrics, snapshot: options.snapshot });
  let subscription: Subscription | null = null;
  let ready = false;
  let stopping = false;
  /** The bulk catch-up under way, then the subscription's start (null: not started, or following). */
  let following: Promise<void> | null = null;
  let resolveCaughtUp: () => void = () => {};
  let rejectCaughtUp: (err: unknown) => void = () => {};
  const caughtUpPromise = new Promise<void>((resolve, reject) => {
    resolveCaughtUp = resolve;
    rejectCaughtUp = reject;
  });
  // A caller that never awaits caughtUp must not see an unhandled rejection.
  caughtUpPromise.catch(() => undefined);
  /** The failed fold was said (log, metric): once. */
  let stoppedOnFailure = false;

  // docs/design.md §7: the convergence histogram counts acknowledgements as they happen. While catching
  // up, the folded acknowledgements are history (already counted by whoever was live then).
  // Only with metrics to feed: a listener makes the read model build a change record per event,
  // through the whole catch-up of a cold start too.
  // A bulk catch-up's acknowledgements are history as well: nothing to hear of them.
  if (metrics !== undefined)
    readModel.onChange(
      (c) => {
        if (!ready) return;
        const before = c.previous?.convergence.acknowledged ?? 0;
        const latency = c.state.convergence.lastLatencyMs;
        if (c.state.convergence.acknowledged > before && latency !== null) metrics.convergenceSeconds.observe(latency / 1000);
      },
      { bulk: () => {} },
    );

  /**
   * A fold that throws stops the projection where it is, loudly — not ready
   * (/readyz 503), converge_projection_failed 1, one error log naming the event — and never
   * steps over the event: a retry would fail the same way, and a skip serves a wrong model.
   * What is folded stays served; a restart meets the same event again.
   */
  function stopOnFailure(err: unknown): void {
    const f = readModel.failure();
    if (f === null || stoppedOnFailure) return;
    stoppedOnFailure = true;
    const s = subscription;
    subscription = null;
    metrics?.projectionFailed.set(1);
    log.error(
      { err, position: f.position.toString(), id: f.id, type: f.type, node: f.node },
      'projections stopped: the fold failed on this event; nothing after it is folded until it is fixed',
    );
    rejectCaughtUp(err);
    if (s !== null) void s.stop();
  }

  /**
   * An event the store cannot read (a type this Converge does not know, docs/operations.md
   * "Upgrades") stops the projection as a failed fold does: a retry reads the same bytes, and
   * stepping over it would serve states the release that wrote it disagrees with. The batch it
   * was in failed whole, so the events before it are folded first: the model stops right before it.
   */
  async function stopOnUnreadable(bad: UnreadableEvent, err: unknown): Promise<void> {
    const s = subscription;
    if (s === null) return;
    subscription = null;
    await s.stop();
    const from = readModel.position() ?? 0n;
    try {
      if (bad.position - 1n > from)
        for await (const batch of store.readAll({ after: from, limit: Number(bad.position - 1n - from) })) {
          readModel.apply(batch);
          const last = batch[batch.length - 1];
          if (last !== undefined) snapshots.folded(last.id);
        }
    } catch (e) {
      // A fold that failed there stopped the model itself; a read that failed leaves it a little earlier.
      if (readModel.failure() !== null) return stopOnFailure(e);
    }
    if (stoppedOnFailure) return;
    stoppedOnFailure = true;
    readModel.refuse({ position: bad.position, id: bad.id, type: bad.type, node: nodeOfStream(bad.stream) ?? '', message: bad.message });
    metrics?.projectionFailed.set(1);
    log.error(
      { err, position: bad.position.toString(), id: bad.id, type: bad.type, stream: bad.stream },
      `projections stopped: the event at position ${bad.position} (${bad.type}) cannot be read by this Converge; nothing after it is folded until a release that reads it runs`,
    );
    rejectCaughtUp(err);
  }

  /**
   * A cold start (nothing restored): fold what the store holds now through the read model's
   * bulk catch-up, a working state per node published once at the end, instead of a new state,
   * a counter update and a change record per event. It stops where the bulk fold
   * cannot go (ReadModel.catchUp); the subscription started after it folds the rest per event.
   * A read that fails ends it too: the subscription reads from there, retrying as it does.
   */
  async function catchUpInBulk(): Promise<void> {
    if (options.catchUp === 'per-event' || readModel.position() !== null) return;
    const t0 = performance.now();
    const source = await coldSource();
    try {
      const until = await store.headPosition();
      if (until === null) return;
      // Pages of columns (src/store/nodeColumns.ts): the typed fields the draft fold reads.
      for await (const page of readNodeColumns(source)) {
        if (!readModel.catchUpColumns(page, until) || stopping) break;
        // One event-loop turn per batch, as the subscription takes (pollingSubscription.ts).
        await nextTurn();
      }
    } catch (err) {
      // The subscription reads the hot store alone: it cannot go on through archived history.
      if (source !== store) throw err;
      log.warn({ err }, 'bulk catch-up read failed; folding on through the subscription');
    } finally {
      readModel.endCatchUp();
    }
    // A snapshot names the event at its position (restore checks it): the last one folded here.
    const at = readModel.position();
    try {
      if (at !== null)
        for await (const batch of store.readAll({ after: at - 1n, limit: 1 })) {
          if (batch[0]?.position === at) snapshots.folded(batch[0].id);
          break;
        }
    } catch (err) {
      log.warn({ err }, 'could not read the last event the bulk catch-up folded; the next snapshot waits for the next event');
    }
    log.debug({ position: at?.toString() ?? null, ms: Math.round(performance.now() - t0) }, 'bulk catch-up done');
    // As the subscription would have on the way: a snapshot once the interval is passed.
    if (at !== null) snapshots.ifDue(at);
  }

  /** Where a fold from zero reads: the store, or with archived history the store and its archive. */
  async function coldSource(): Promise<EventStore> {
    const archived = (await store.archiveManifest?.())?.segments.length ?? 0;
    if (archived === 0) return store;
    if (options.coldStore === undefined)
      throw new ConvergeError(
        'CONVERGE_ERR_CONFIG_INVALID',
        `no snapshot could be restored, and ${archived} segment(s) of this store's history are in its archive: give --archive-dir so the fold from zero reads them, or the states would miss them`,
      );
    return options.coldStore();
  }

  async function lag(): Promise<bigint> {
    const head = (await store.headPosition()) ?? 0n;
    const at = readModel.position() ?? 0n;
    return head > at ? head - at : 0n;
  }

  // A scrape waits on the store only so long: cut off from it, a head read hangs until the link
  // heals, and a scrape that hung with it would hide every gauge (the relay's, the ingest's) just
  // when they tell of the outage. One read at a time, shared, so hung scrapes do not pile up reads.
  const scrapeWaitMs = options.scrapeWaitMs ?? 500;
  let headRead: Promise<bigint> | null = null;
  function lagWithin(ms: number): Promise<bigint | undefined> {
    if (headRead === null) {
      const read = lag();
      headRead = read;
      // Handled here too: a read that fails after every scrape gave up on it must not go unhandled.
      void read
        .then(
          () => undefined,
          () => undefined,
        )
        .finally(() => {
          if (headRead === read) headRead = null;
        });
    }
    const gaveUp = new AbortController();
    // A read that fails (the store refused, or gave up on a dead connection) hides nothing either.
    const answered = headRead.catch(() => undefined);
    return Promise.race([answered, sleep(ms, gaveUp.signal).then(() => undefined)]).finally(() => gaveUp.abort());
  }

  // O(series): the read model keeps nodes counted by status × liveness as events fold and as
  // time passes (livenessTracker.ts). Walking every node per scrape cost 45 ms at 100,000 nodes.
  async function refreshMetrics(now: number = (options.now ?? Date.now)()): Promise<void> {
    if (metrics === undefined) return;
    const behind = await lagWithin(scrapeWaitMs);
    if (behind !== undefined) metrics.projectionLag.set(Number(behind));
    const counts = readModel.liveness(now);
    for (const status of nodeStatuses) {
      for (const liveness of livenessStates) metrics.nodes.set({ status, liveness }, counts.get(status, liveness));
    }
  }

  return {
    readModel,
    rollouts,
    async start() {
      if (subscription !== null || following !== null) return;
      stopping = false;
      await snapshots.restore();
      // The bulk catch-up and then the subscription run behind start(), as the subscription's own
      // catch-up always did: `serve` starts ingest and opens the API meanwhile (/readyz 503).
      following = catchUpInBulk()
        .then(() => {
          if (!stopping) follow();
        })
        .catch((err: unknown) => {
          log.error({ err }, 'projections could not start following the store');
          rejectCaughtUp(err);
        })
        .finally(() => {
          following = null;
        });
    },
    caughtUp: () => caughtUpPromise,
    isReady: () => ready && readModel.failure() === null,
    failure: () => readModel.failure(),
    lag,
    refreshMetrics,
    writeSnapshot: (withinMs) => snapshots.writeNow(withinMs),
    async stop() {
      stopping = true;
      if (following !== null) await following;
      const s = subscription;
      subscription = null;
      if (s !== null) await s.stop();
      await snapshots.settled();
    },
  };

  /** Follow the store from the read model's position: the rest of a catch-up, then live. */
  function follow(): void {
    subscription = store.subscribe({
      after: readModel.position(),
      ...(options.batchSize === undefined ? {} : { batchSize: options.batchSize }),
      handler: (events) => {
        // Tracing on, the fold of an event ingest traced is a span of the report's trace.
        const folds = tracer().enabled ? foldSpans(events) : null;
        try {
          readModel.apply(events);
        } catch (err) {
          stopOnFailure(err);
          for (const f of folds ?? []) f.end(err);
          throw err;
        }
        for (const f of folds ?? []) f.end();
        const last = events[events.length - 1];
        if (last !== undefined) snapshots.folded(last.id);
        if (last !== undefined) {
          snapshots.ifDue(last.position);
        }
        if (metrics !== undefined && ready) metrics.projectionLag.set(0);
      },
      onCaughtUp: () => {
        ready = true;
        log.info({ position: readModel.position()?.toString() ?? null, nodes: readModel.size() }, 'projections caught up');
        resolveCaughtUp();
      },
      onError: (err) => {
        if (readModel.failure() !== null) return;
        const bad = unreadableEventOf(err);
        if (bad === null) log.error({ err }, 'projection subscription error; retrying');
        else void stopOnUnreadable(bad, err);
      },
    });
  }
}

/** A `converge.fold` span for each event whose ingest was traced (remembered by id), begun now. */
function foldSpans(events: readonly Recorded[]): Span[] {
  const t = tracer();
  const out: Span[] = [];
  for (const e of events) {
    if (!t.knows(eventKey(e.id))) continue;
    out.push(
      t.start('converge.fold', { parent: eventKey(e.id), attributes: { [attr.position]: String(e.position), [attr.eventType]: e.type } }),
    );
  }
  return out;
}
