import type { Delivery } from '../../transport/port.ts';
import { costOf, createNodeBudget } from '../nodeBudget.ts';
import { performance } from 'node:perf_hooks';
import { createLivenessObserver } from '../liveness/observer.ts';
import { createBatcher } from './batcher.ts';
import { createCommitter } from './committer.ts';
import type { Pending } from './committer.ts';
import { createDeadLetters } from './deadLetter.ts';
import { createFairParse } from './fairParse.ts';
import type { Ingest, IngestOptions } from './options.ts';
import { newCounts, settingsOf } from './options.ts';
import { createSentEarlierLookup } from './sentEarlier.ts';
import { toEvent } from './toEvent.ts';
import { createReportTraces } from './traceReports.ts';

// Reports and alive in (docs/design.md#2-events-the-system-of-record), as a delivery travels:
// shed if over its node's budget (deadLetter.ts), parsed in a fair share of the event loop
// (fairParse.ts) into at most one event with a deterministic id (toEvent.ts), gathered into
// batches (batcher.ts), appended in one store call per batch and only then acked (committer.ts).
// Nothing is acked before it is durable; a delivery we refuse goes to mesh.dead with its reason
// and is acked once the broker confirmed that copy (deadLetter.ts).

export function createIngest(options: IngestOptions): Ingest {
  const { store, source, metrics } = options;
  const logger = options.logger.child({ component: 'ingest' });
  const settings = settingsOf(options);
  const { now, nowMs, backoff } = settings;
  const abort = new AbortController();
  const counts = newCounts();
  /**
   * When each node was last heard from, in ms: a holder per node updated in place, so a report
   * costs one lookup and no Date (a Date per delivery, kept per node until its next report, was
   * promoted by the collector at fleet scale).
   */
  const lastSeen = new Map<string, { ms: number }>();
  /** seenAt of the last AliveSeen we decided to append, per node: the coalescing clock. */
  const lastAliveEvent = new Map<string, number>();
  const lastAliveMs = (node: string): number | undefined => lastAliveEvent.get(node);
  // One budget per queue, keyed by the sender alone: a key of kind + user_id was a concatenated
  // string per delivery, flattened and hashed for the lookup. The buckets are the same: one per
  // node and queue.
  const budgets =
    options.nodeBudget === undefined
      ? null
      : { report: createNodeBudget({ ...options.nodeBudget, now: nowMs }), alive: createNodeBudget({ ...options.nodeBudget, now: nowMs }) };

  const traces = createReportTraces();
  const deadLetters = createDeadLetters({ source, logger, metrics, now, backoff, signal: abort.signal, counts });
  const committer = createCommitter({
    store,
    source,
    logger,
    metrics,
    now,
    backoff,
    signal: abort.signal,
    counts,
    refuse: deadLetters.refuse,
    onAppended: traces.appended,
  });
  const lookUp = options.knownSends === undefined ? null : createSentEarlierLookup(store, options.knownSends, logger);
  const commit = (batch: readonly Pending[]): Promise<boolean> => {
    traces.appending(batch);
    return committer.write(batch);
  };
  const write = lookUp === null ? commit : async (batch: readonly Pending[]) => commit(await lookUp(batch));
  const batcher = createBatcher({ ...settings, write, signal: abort.signal });
  const fairParse = createFairParse({ bytesPerTurn: settings.parseBytesPerTurn, parse });
  const live = options.liveness;
  const mono = live?.mono ?? (() => performance.now());
  const observer =
    live === undefined
      ? null
      : createLivenessObserver({
          store,
          logger,
          engine: live.engine,
          graceMs: live.graceMs,
          flushMs: live.flushMs,
          enqueue: (events) => {
            for (const event of events) batcher.add({ delivery: null, event });
          },
          ...(live.folded === undefined ? {} : { folded: live.folded }),
          now: nowMs,
          mono,
        });
  const recorder = observer?.recorder ?? null;

  function seen(node: string, ms: number): void {
    const prev = lastSeen.get(node);
    if (prev === undefined) lastSeen.set(node, { ms });
    else if (ms > prev.ms) prev.ms = ms;
  }

  /** Parse a delivery and queue its event for the next append (or refuse it). */
  function parse(d: Delivery): void {
    const at = nowMs();
    let received;
    try {
      received = toEvent(d, at, settings, recorder === null ? lastAliveMs : null);
    } catch (err) {
      deadLetters.refuse(d, err);
      return;
    }
    traces.parsed(received.event);
    if (recorder !== null) {
      // A sign of life from a node not held heard is a transition; its NodeHeard goes first.
      const heard = recorder.heard(received.node, at, mono());
      if (received.event === null) {
        if (heard === null) counts.coalesced++;
        batcher.add({ delivery: d, event: heard });
        return;
      }
      if (heard !== null) batcher.add({ delivery: null, event: heard });
      batcher.add({ delivery: d, event: received.event });
      return;
    }
    seen(received.node, at);
    if (received.event === null) counts.coalesced++;
    else if (received.event.type === 'AliveSeen') lastAliveEvent.set(received.node, at);
    batcher.add({ delivery: d, event: received.event });
  }

  function onDelivery(d: Delivery): void {
    counts.received++;
    if (d.redelivered) {
      counts.redelivered++;
      metrics?.ingestRedelivered.inc();
    }
    // Over its node's budget (nodeBudget.ts): shed before parsing.
    if (budgets !== null && d.userId !== null && !budgets[d.kind].take(d.userId, costOf(d.body.length))) {
      deadLetters.shed(d, d.userId);
      return;
    }
    fairParse.offer(d);
  }

  async function stop(): Promise<void> {
    await source.pause();
    observer?.pause();
    // Give what is in flight a chance to land and be acked; a store that is down does not hold us.
    let graceEnded = (): void => {};
    const graceOver = new Promise<void>((r) => (graceEnded = r));
    const grace = setTimeout(() => {
      abort.abort();
      graceEnded();
    }, 5_000);
    for (;;) {
      // What waits for a turn is parsed now, all of it: stopping writes what it has received.
      fairParse.parseWaiting(Number.POSITIVE_INFINITY);
      const flushing = batcher.flushAll();
      if (flushing === null) break;
      await flushing;
      if ((batcher.size() === 0 && fairParse.waiting() === 0) || abort.signal.aborted) break;
    }
    // Batches committed and still being synced are acked when their sync lands (or left unacked).
    await committer.settle();
    // The lease's last flush and the end of the observed span, after every transition it heard.
    // With the store down past the grace, nothing more is written: the next start closes this span
    // at the last flush, as after a crash.
    if (abort.signal.aborted) observer?.halt();
    else await observer?.stop();
    // Dead-letters in flight get the rest of the grace, not forever: one may be waiting for a
    // dead-letter channel while the broker is away, and only source.stop() ends that wait.
    // Stopping the source first is safe: a delivery whose copy in mesh.dead was not confirmed is
    // never acked, so the broker redelivers it and it is refused again.
    await Promise.race([deadLetters.settled(), graceOver]);
    clearTimeout(grace);
    abort.abort();
    await source.stop();
    await deadLetters.settled();
  }

  const waiting = (): number => fairParse.waiting() + batcher.size();
  return {
    start: async () => {
      // The lease is loaded before anything is consumed; the span begins when consuming does (told
      // before the first delivery), so every transition falls inside it. Until then, and while
      // consuming is lost with the broker link, no node can be heard, so none may be judged silent.
      await observer?.start();
      await source.start(onDelivery, observer === null ? undefined : (link) => (link === 'lost' ? observer.lost() : observer.consuming()));
    },
    stop,
    lastSeenAt: (node) => {
      const at = recorder === null ? lastSeen.get(node)?.ms : recorder.lastSeenMs(node);
      return at === undefined ? null : new Date(at);
    },
    lastSeen: () =>
      recorder === null
        ? new Map([...lastSeen].map(([node, at]) => [node, new Date(at.ms)]))
        : new Map([...recorder.all()].map(([node, ms]) => [node, new Date(ms)])),
    isHealthy: committer.isHealthy,
    brokerLost: () => observer?.isLost() ?? false,
    // Without an observer nothing is recorded of observation, and nothing is held for it.
    observedSince: () => (observer === null ? Number.NEGATIVE_INFINITY : observer.observedSince()),
    health: () => {
      const h = committer.health();
      return { ...h, pending: waiting() + h.pending };
    },
    stats: () => ({ ...counts, pending: waiting() }),
  };
}
