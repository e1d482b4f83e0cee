import type { Logger } from 'pino';
import { ConvergeError, toConvergeError } from '../core/errors.ts';
import type { ErrorCode } from '../core/errors.ts';
import { makeAliveSeen, makeReportReceived, streamOf } from '../core/events/index.ts';
import type { NodeEvent } from '../core/events/index.ts';
import type { AppendPipeline, AppendResult, EventStore, NewEvent, StreamWrite } from '../store/port.ts';
import type { Delivery, IngestSource } from '../transport/port.ts';
import { defaultWireLimits, parseAlive, parseReport } from '../core/wire/index.ts';
import type { WireLimits } from '../core/wire/index.ts';
import type { Metrics } from '../metrics.ts';
import { retry } from '../retry.ts';
import type { ComponentHealth } from './health.ts';
import { costOf, createNodeBudget } from './nodeBudget.ts';
import type { NodeBudgetOptions } from './nodeBudget.ts';

// Reports and alive in (DESIGN §1, §2): parse at the edge, check the sender, turn each
// delivery into at most one event with a deterministic id, append many deliveries in one
// store call, and only then ack them. Nothing is acked before it is durable; a delivery we
// refuse goes to mesh.dead with its reason and is acked once the broker confirmed that copy.

export type IngestOptions = Readonly<{
  store: EventStore;
  source: IngestSource;
  logger: Logger;
  metrics?: Metrics;
  /** Body size/depth limits; default 256 KiB, depth 32. */
  limits?: Partial<WireLimits>;
  /**
   * Accept a message with no `user_id` as coming from the node its body names. For labs whose
   * nodes share one broker account only (DESIGN §1); a *mismatched* user_id is still refused.
   * Env: CONVERGE_TRUST_MISSING_USER_ID=on (read by config, not here).
   */
  trustMissingUserId?: boolean;
  /** At most one AliveSeen per node per this many ms (DESIGN §2, default 15 s). */
  aliveResolutionMs?: number;
  /** Most deliveries per store.append call. */
  batchSize?: number;
  /**
   * Most body bytes per store.append call (at least one delivery). An append serialises and
   * writes synchronously: 500 reports of 130 KB held the event loop for seconds (issue 13).
   */
  batchBytes?: number;
  /**
   * Most body bytes parsed in one event-loop turn (at least one delivery). amqplib hands every
   * frame it has buffered to onDelivery in one go, and five accepted 130 KB reports parsed there
   * held the loop 35–87 ms (bench/fairness). Past this, deliveries wait, in order, for later turns.
   */
  parseBytesPerTurn?: number;
  /** How long a partial batch waits for company before it is written. */
  flushMs?: number;
  now?: () => Date;
  /** Backoff while the store is unavailable. */
  retry?: Readonly<{ minMs?: number; maxMs?: number }>;
  /**
   * Budget per node (by broker-validated user_id) and queue; the excess is refused to the queue's
   * dead-lettering as CONVERGE_ERR_RATE_LIMITED (issue 13). Absent: no budget.
   */
  nodeBudget?: Omit<NodeBudgetOptions, 'now'>;
}>;

export type Ingest = Readonly<{
  start: () => Promise<void>;
  /** Stop consuming, write and ack what is in flight (unless the store is down), then stop the source. */
  stop: () => Promise<void>;
  /** The exact last time a node was heard from (alive or report), in memory only; AliveSeen in the store is coalesced. A new Date each call. */
  lastSeenAt: (node: string) => Date | null;
  /** Every node's lastSeenAt, copied (O(nodes)). */
  lastSeen: () => ReadonlyMap<string, Date>;
  /** False while appends are failing and deliveries are held unacked. */
  isHealthy: () => boolean;
  /** What /readyz and the metrics say of ingest; `pending` always set. */
  health: () => ComponentHealth;
  stats: () => Readonly<{
    received: number;
    redelivered: number;
    appended: number;
    acked: number;
    deadLettered: number;
    coalesced: number;
    /** Messages over their node's budget, refused for the queue to dead-letter (not in deadLettered). */
    rateLimited: number;
    pending: number;
  }>;
}>;

/** Batches appended through the store's pipeline and not yet acked, at once; the broker's prefetch bounds them too. */
const maxSyncing = 4;

/** A body this small (one unit of the node budget, costOf) is never held back for a later turn. */
const routineBytes = 4096;

type Pending = Readonly<{ delivery: Delivery; event: NewEvent<NodeEvent> | null }>;

/** Store errors that no retry will fix: the delivery itself is the problem. */
const poisonCodes: ReadonlySet<ErrorCode> = new Set([
  'CONVERGE_ERR_EVENT_TOO_LARGE',
  'CONVERGE_ERR_DUPLICATE_EVENT_ID',
  'CONVERGE_ERR_EVENT_INVALID',
]);

export function createIngest(options: IngestOptions): Ingest {
  const { store, source, metrics } = options;
  const logger = options.logger.child({ component: 'ingest' });
  const limits: WireLimits = { ...defaultWireLimits, ...options.limits };
  const trustMissing = options.trustMissingUserId ?? false;
  const resolutionMs = options.aliveResolutionMs ?? 15_000;
  const batchSize = Math.max(1, options.batchSize ?? 500);
  const batchBytes = Math.max(1, options.batchBytes ?? 256 * 1024);
  const flushMs = options.flushMs ?? 10;
  // 128 KiB: the turn that receives and the check phase of the same event-loop iteration each
  // parse up to this (plus one body), so an iteration takes in about two 130 KB reports (~14 ms).
  const parseBytesPerTurn = Math.max(1, options.parseBytesPerTurn ?? 128 * 1024);
  const now = options.now ?? (() => new Date());
  // The budget's clock in ms without a Date per delivery (issue 10 profile: ~1.5 µs a report).
  const nowMs = options.now === undefined ? Date.now : () => options.now!().getTime();
  // Jittered: every engine instance behind one broker or store retries after the same outage.
  const backoff = { minMs: options.retry?.minMs ?? 100, maxMs: options.retry?.maxMs ?? 5_000, jitter: 0.5 };

  const abort = new AbortController();
  /**
   * When each node was last heard from, in ms: a holder per node updated in place, so a report
   * costs one lookup and no Date (a Date per delivery, kept per node until its next report,
   * was promoted by the collector at 10,000 nodes; issue 10).
   */
  const lastSeen = new Map<string, { ms: number }>();
  /** seenAt of the last AliveSeen we decided to append, per node: the coalescing clock. */
  const lastAliveEvent = new Map<string, number>();
  let pending: Pending[] = [];
  /** Deliveries within their node's budget, waiting for a turn to be parsed in (oldest first). */
  let unparsed: Delivery[] = [];
  /** Waiting deliveries per sender (user_id; '' for none): a sender's later delivery waits behind them. */
  const waitingBy = new Map<string, number>();
  /** Body bytes parsed in this turn; `turnArmed`: a setImmediate will start the next turn's count. */
  let turnBytes = 0;
  let turnArmed = false;
  let pendingBytes = 0;
  let timer: NodeJS.Timeout | null = null;
  let flushing: Promise<void> | null = null;
  const deadLettering = new Set<Promise<void>>();
  let healthy = true;
  let lastAppendAt: Date | null = null;
  let failingSince: Date | null = null;
  let lastError: string | null = null;
  /** Deliveries in the batch being appended (no longer in `pending`). */
  let committing = 0;
  /**
   * Batches appended through the store's pipeline (EventStore.pipeline) and waiting for their
   * commit to be on disk, oldest first; each settles once acked (true) or left unacked at stop
   * (false). `syncingDeliveries` counts their deliveries.
   */
  let syncing: Promise<boolean>[] = [];
  let syncingDeliveries = 0;
  /** The pipeline batches go through; dropped once one of its appends failed, and made again when nothing waits on it. */
  let pipe: AppendPipeline | null = null;
  let batchSeq = 0;
  metrics?.ingestHealthy.set(1);
  const counts = { received: 0, redelivered: 0, appended: 0, acked: 0, deadLettered: 0, coalesced: 0, rateLimited: 0 };
  // One budget per queue, keyed by the sender alone: a key of kind + user_id was a concatenated
  // string per delivery, flattened and hashed for the lookup (issue 10 profile: ~2 µs a report at
  // 10,000 nodes). The buckets are the same: one per node and queue.
  const budgets =
    options.nodeBudget === undefined
      ? null
      : { report: createNodeBudget({ ...options.nodeBudget, now: nowMs }), alive: createNodeBudget({ ...options.nodeBudget, now: nowMs }) };
  /** Messages refused by the budget per node since the last warning: a flood logs a line per 5 s, not one per message. */
  const limitedSince = new Map<string, number>();
  let limitedLogAt = 0;

  function checkSender(node: string, d: Delivery): void {
    if (d.userId === null) {
      if (trustMissing) return;
      throw new ConvergeError(
        'CONVERGE_ERR_USER_ID_MISSING',
        `${d.kind} for node ${JSON.stringify(node)} has no user_id; the sender is unknown`,
      );
    }
    if (d.userId !== node) {
      throw new ConvergeError(
        'CONVERGE_ERR_USER_ID_MISMATCH',
        `${d.kind} names node ${JSON.stringify(node)} but was sent by ${JSON.stringify(d.userId)}`,
      );
    }
  }

  function seen(node: string, ms: number): void {
    const prev = lastSeen.get(node);
    if (prev === undefined) lastSeen.set(node, { ms });
    else if (ms > prev.ms) prev.ms = ms;
  }

  /** The event for a delivery, null for an alive inside the resolution window; throws to refuse it. */
  function toEvent(d: Delivery): NewEvent<NodeEvent> | null {
    if (d.routingKey !== d.kind) {
      throw new ConvergeError(
        'CONVERGE_ERR_ROUTING_KEY',
        `a message on the ${d.kind} queue arrived with routing key ${JSON.stringify(d.routingKey)}`,
      );
    }
    const at = nowMs();
    if (d.kind === 'report') {
      const report = parseReport(d.body, limits);
      checkSender(report.node, d);
      seen(report.node, at);
      return makeReportReceived(report, d.body, { messageId: d.messageId, redelivered: d.redelivered, userId: d.userId }, at);
    }
    const alive = parseAlive(d.body, limits);
    checkSender(alive.node, d);
    seen(alive.node, at);
    // DESIGN §2: at most one AliveSeen per node per resolution, always the first after a gap.
    const last = lastAliveEvent.get(alive.node);
    if (last !== undefined && at - last < resolutionMs) {
      counts.coalesced++;
      return null;
    }
    lastAliveEvent.set(alive.node, at);
    return makeAliveSeen(alive, at);
  }

  function logRateLimited(node: string): void {
    limitedSince.set(node, (limitedSince.get(node) ?? 0) + 1);
    const t = now().getTime();
    if (t - limitedLogAt < 5_000) return;
    limitedLogAt = t;
    logger.warn(
      { code: 'CONVERGE_ERR_RATE_LIMITED', nodes: Object.fromEntries(limitedSince) },
      'messages over their node budget refused to mesh.dead (x-death reason rejected)',
    );
    limitedSince.clear();
  }

  function refuse(d: Delivery, err: unknown): void {
    const e = toConvergeError(err);
    metrics?.ingestRejected.inc({ reason: e.code });
    logger.warn(
      { code: e.code, kind: d.kind, messageId: d.messageId, userId: d.userId, reason: e.message },
      'refusing message to mesh.dead',
    );
    // Retry while the delivery can still be acked; once its channel is gone the broker will
    // redeliver it and it is refused again then.
    const p = (async () => {
      if (!source.isLive(d)) return;
      const r = await retry(() => source.deadLetter(d, e.code, e.message), {
        ...backoff,
        signal: abort.signal,
        onError: (err2) => {
          logger.warn({ err: (err2 as Error).message, messageId: d.messageId }, 'dead-letter publish failed; retrying');
          return source.isLive(d);
        },
      });
      if (r.ok) counts.deadLettered++;
    })();
    deadLettering.add(p);
    void p.finally(() => deadLettering.delete(p));
  }

  function onDelivery(d: Delivery): void {
    counts.received++;
    if (d.redelivered) {
      counts.redelivered++;
      metrics?.ingestRedelivered.inc();
    }
    // Over its node's budget (nodeBudget.ts): shed before parsing, through the queue's own
    // dead-lettering. A backlog in mesh.reports delays every node's reports alike, and publishing
    // a coded copy of each cost more than the flood did to send (bench/fairness: the backlog
    // grew by 400–2,400/s that way and shrank by 760–2,500/s with nack).
    if (budgets !== null && d.userId !== null && !budgets[d.kind].take(d.userId, costOf(d.body.length))) {
      counts.rateLimited++;
      metrics?.ingestRejected.inc({ reason: 'CONVERGE_ERR_RATE_LIMITED' });
      logRateLimited(d.userId);
      source.reject(d, 'CONVERGE_ERR_RATE_LIMITED');
      return;
    }
    // A node's reports are stored in the order they came: nothing overtakes a delivery of the
    // same sender that waits. A routine report (one budget unit) of a sender with none waiting is
    // parsed at once, so another node's wide reports do not delay it (the victim in bench/fairness).
    const sender = d.userId ?? '';
    if (waitingBy.has(sender) || (turnBytes >= parseBytesPerTurn && d.body.length > routineBytes)) {
      unparsed.push(d);
      waitingBy.set(sender, (waitingBy.get(sender) ?? 0) + 1);
      armTurn();
      return;
    }
    accept(d);
  }

  /** Parse a delivery and queue its event for the next append (or refuse it). */
  function accept(d: Delivery): void {
    turnBytes += d.body.length;
    armTurn();
    let event: NewEvent<NodeEvent> | null;
    try {
      event = toEvent(d);
    } catch (err) {
      refuse(d, err);
      return;
    }
    pending.push({ delivery: d, event });
    pendingBytes += d.body.length;
    schedule();
  }

  function armTurn(): void {
    if (turnArmed) return;
    turnArmed = true;
    setImmediate(nextTurn);
  }

  /** A new turn: parse waiting deliveries up to its bytes, and come back in the next if some are left. */
  function nextTurn(): void {
    turnArmed = false;
    turnBytes = 0;
    parseWaiting(parseBytesPerTurn);
  }

  function parseWaiting(most: number): void {
    let i = 0;
    while (i < unparsed.length && (turnBytes < most || i === 0)) {
      const d = unparsed[i++]!;
      const sender = d.userId ?? '';
      const left = (waitingBy.get(sender) ?? 1) - 1;
      if (left === 0) waitingBy.delete(sender);
      else waitingBy.set(sender, left);
      accept(d);
    }
    unparsed = i === unparsed.length ? [] : unparsed.slice(i);
    if (unparsed.length > 0) armTurn();
  }

  function schedule(): void {
    if (flushing !== null) return; // the running flush loop takes whatever has arrived
    if (pending.length >= batchSize || pendingBytes >= batchBytes) kick(false);
    else if (timer === null) timer = setTimeout(kick, flushMs, true);
  }

  /** Write what is pending: full batches only, or everything once a partial batch has waited flushMs (or we stop). */
  function kick(partial: boolean): void {
    if (timer !== null) clearTimeout(timer);
    timer = null;
    if (flushing !== null) return;
    flushing = drain(partial).finally(() => {
      flushing = null;
      if (pending.length > 0 && !abort.signal.aborted) schedule();
    });
  }

  // Full batches only, unless told otherwise: each append is one commit and one fsync, and
  // writing whatever had trickled in behind a full batch made ~157 appends of 50,000 reports
  // instead of 100, the one largest cost in bench/ingest.ts. A remainder waits at most flushMs,
  // as the baseline's does.
  async function drain(partial: boolean): Promise<void> {
    while (pending.length >= batchSize || pendingBytes >= batchBytes || (partial && pending.length > 0)) {
      const n = batchLength();
      const batch = pending.length === n ? pending : pending.slice(0, n);
      pending = pending.length === n ? [] : pending.slice(n);
      for (const p of batch) pendingBytes -= p.delivery.body.length;
      const ok = store.pipeline === undefined ? await commit(batch) : await commitPipelined(batch);
      if (!ok) {
        // Stopped with the store down: leave them unacked; the broker redelivers to whoever is next.
        return;
      }
      // An append settles as a microtask: without a turn between batches a backlog is written
      // in one event-loop turn, deliveries and timers waiting behind it (issue 13).
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  /** Deliveries in the next batch: up to batchSize, and no more body bytes than batchBytes (but at least one). */
  function batchLength(): number {
    const most = Math.min(batchSize, pending.length);
    let bytes = 0;
    for (let i = 0; i < most; i++) {
      bytes += pending[i]!.delivery.body.length;
      if (bytes >= batchBytes) return i + 1;
    }
    return most;
  }

  function writesOf(batch: readonly Pending[]): StreamWrite[] {
    // Grouped by node, the stream name made once per group: a name per event was a new string,
    // flattened and hashed again by the Map (the same groups, in the same order: streamOf is one-to-one).
    const byNode = new Map<string, NewEvent[]>();
    for (const { event } of batch) {
      if (event === null) continue;
      const node = event.data.node;
      const list = byNode.get(node);
      // `[event]`, not `[]` then push: a push into an empty array gives it room for 17 (at
      // 10,000 nodes most groups hold one event: ~150 bytes a report for the collector).
      if (list === undefined) byNode.set(node, [event]);
      else list.push(event);
    }
    // 'any': reports and alive never conflict with sends; ids make retries no-ops (DESIGN §2).
    const writes: StreamWrite[] = [];
    for (const [node, events] of byNode) writes.push({ stream: streamOf(node), expected: 'any', events });
    return writes;
  }

  /**
   * Append the batch through the store's pipeline and ack it once its commit is on disk, without
   * waiting for that here: the next batch is appended while this one is committed and synced, and
   * shares the sync (issue 10: ~14 ms a sync on the bench machine, one per batch when ingest waited
   * for each). Acks stay in append order. An append that fails takes the retrying path once the
   * batches before it are settled; the pipeline refuses every later append untried, so those take
   * it too, in order, and a new pipeline is started only once all of them have settled. At most
   * `maxSyncing` batches wait; past that, the oldest is waited for.
   */
  async function commitPipelined(batch: readonly Pending[]): Promise<boolean> {
    const writes = writesOf(batch);
    if (pipe === null) {
      if (!(await settleSyncing())) return false;
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

  /** Wait for every batch waiting for its sync; false if one was left unacked (stopped with the store down). */
  async function settleSyncing(): Promise<boolean> {
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
    source.ack(batch.map((p) => p.delivery));
    counts.acked += batch.length;
  }

  /** Append the batch's events (retrying while the store is down), then ack it. False if stopped first. */
  async function commit(batch: readonly Pending[]): Promise<boolean> {
    // Made only when there is something to log: a pino child per batch showed in the profile.
    const seq = ++batchSeq;
    let batchLog: Logger | null = null;
    const log = (): Logger => (batchLog ??= logger.child({ batch: seq, size: batch.length }));
    const writes = writesOf(batch);
    if (writes.length > 0) {
      committing = batch.length;
      const r = await retry(() => store.append(writes), {
        ...backoff,
        signal: abort.signal,
        onError: (err) => {
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
        },
      });
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
    appended(batch, writes, null, log);
    return true;
  }

  /** A batch the store refused as a whole: find the one delivery to blame, write the rest. */
  async function commitOneByOne(batch: readonly Pending[], log: () => Logger): Promise<boolean> {
    for (const p of batch) {
      if (p.event === null) {
        source.ack([p.delivery]);
        counts.acked++;
        continue;
      }
      try {
        // Written 0: a duplicate of an event stored already (the repeat that got the batch refused).
        const written = (await store.append(writesOf([p]))).streams[0]?.written ?? 0;
        if (written > 0) metrics?.eventsAppended.inc({ type: p.event.type });
        source.ack([p.delivery]);
        counts.appended += written;
        counts.acked++;
      } catch (err) {
        const e = toConvergeError(err, 'CONVERGE_ERR_STORE_UNAVAILABLE');
        if (poisonCodes.has(e.code)) refuse(p.delivery, e);
        else {
          // Transient after all: the rest goes back through the retrying path.
          log().warn({ code: e.code }, 'store failed while isolating a poison event');
          return commit(batch.slice(batch.indexOf(p)));
        }
      }
    }
    return true;
  }

  return {
    start: () => source.start(onDelivery),
    stop: async () => {
      await source.pause();
      // Give what is in flight a chance to land and be acked; a store that is down does not hold us.
      let graceEnded = (): void => {};
      const graceOver = new Promise<void>((r) => (graceEnded = r));
      const grace = setTimeout(() => {
        abort.abort();
        graceEnded();
      }, 5_000);
      for (;;) {
        // What waits for a turn is parsed now, all of it: stopping writes what it has received.
        parseWaiting(Number.POSITIVE_INFINITY);
        kick(true);
        const f = flushing as Promise<void> | null;
        if (f === null) break;
        await f;
        if ((pending.length === 0 && unparsed.length === 0) || abort.signal.aborted) break;
      }
      // Batches committed and still being synced are acked when their sync lands (or left unacked).
      await settleSyncing();
      // Dead-letters in flight get the rest of the grace, not forever: one may be waiting for a
      // dead-letter channel while the broker is away, and only source.stop() ends that wait.
      // Stopping the source first is safe (DESIGN §1): a delivery whose copy in mesh.dead was
      // not confirmed is never acked, so the broker redelivers it and it is refused again.
      await Promise.race([Promise.all([...deadLettering]), graceOver]);
      clearTimeout(grace);
      abort.abort();
      await source.stop();
      await Promise.all([...deadLettering]);
    },
    lastSeenAt: (node) => {
      const at = lastSeen.get(node);
      return at === undefined ? null : new Date(at.ms);
    },
    lastSeen: () => new Map([...lastSeen].map(([node, at]) => [node, new Date(at.ms)])),
    isHealthy: () => healthy,
    health: () => ({
      healthy,
      lastSuccessAt: lastAppendAt,
      failingSince,
      error: lastError,
      pending: unparsed.length + pending.length + committing + syncingDeliveries,
    }),
    stats: () => ({ ...counts, pending: unparsed.length + pending.length }),
  };
}
