import type { Logger } from 'pino';
import type { DeclarationSent, Recorded } from '../core/events/index.ts';
import type { EventStore, LeaseHold, Subscription } from '../store/port.ts';
import { whileLeased } from '../store/whileLeased.ts';
import type { DeclarationPublisher, OutboundDeclaration } from '../transport/port.ts';
import { encodeSignedBase64 } from '../core/wire/index.ts';
import type { Metrics } from '../metrics.ts';
import type { ComponentHealth } from './health.ts';
import { attr, digestKey, tracer } from '../tracing/index.ts';

// The store is the outbox (docs/design.md#2-events-the-system-of-record): a checkpointed subscription to DeclarationSent
// publishes each declaration and returns only once the broker confirmed every one in the
// batch, because the subscription saves its checkpoint after the handler resolves. A crash
// (or a failed publish, which makes the handler throw and the batch retry) re-publishes from
// the checkpoint: delivery to nodes is at-least-once, and a node recognises a repeat by digest.
//
// The store selects the declarations (SubscribeOptions.types; SQLite from a partial index), so
// the relay never reads the reports and alives that make up nearly all of the log, and its
// checkpoint moves — and is written — only when declarations were published: once per batch of
// up to `batchSize`, which is the redelivery bound (a crash re-publishes at most the batch in
// flight). Reading every event and saving the checkpoint every 100 events of any kind was most of
// the fsyncs and a share of every report's cost in `serve`.

export type RelayOptions = Readonly<{
  store: EventStore;
  publisher: DeclarationPublisher;
  logger: Logger;
  metrics?: Metrics;
  /** Checkpoint name in the store. */
  checkpoint?: string;
  /** Declarations published (and confirmed) per batch, concurrently. */
  batchSize?: number;
  /**
   * Run before the first publish of a lease taken from a holder that did not give it up (its
   * session died, or its beat stopped): makes sure nothing that holder issued can still reach the
   * broker (docs/operations.md "Fencing the relay"). serve closes the other engines' broker
   * connections; without it the relay publishes at once.
   */
  fenceBroker?: (signal: AbortSignal) => Promise<void>;
}>;

export type Relay = Readonly<{
  /** Start relaying, at once, or once this engine holds the store's relay lease (below). */
  start: () => void;
  stop: () => Promise<void>;
  /** Position of the last declaration whose publish the broker confirmed (null before any). */
  position: () => bigint | null;
  isCaughtUp: () => boolean;
  /** Whether this engine is the one publishing (it holds the lease, or the store has none). */
  active: () => boolean;
  /** Whether the last batch was published (/readyz and converge_relay_healthy). */
  health: () => ComponentHealth;
}>;

export function outboundOf(e: Recorded<DeclarationSent>): OutboundDeclaration {
  const d = e.data;
  return {
    node: d.node,
    digest: d.digest,
    keyId: d.keyId,
    // The bytes exactly as stored: never rebuilt, or the signature would not be over them.
    body: encodeSignedBase64(d.declaration, d.signature),
  };
}

export function createRelay(options: RelayOptions): Relay {
  const { store, publisher, metrics } = options;
  const logger = options.logger.child({ component: 'relay' });
  let sub: Subscription | null = null;
  let health: ComponentHealth = { healthy: true, lastSuccessAt: null, failingSince: null, error: null };
  metrics?.relayHealthy.set(1);

  /**
   * Fencing: a holder frozen past its lease (SIGSTOP, a paused VM) wakes still subscribed, while
   * another engine publishes. It publishes nothing once its lease's bound has passed (checked
   * before each publish, on its monotonic clock, and again by the publisher right before the
   * message is written, after any wait for a channel), and a batch counts as published — its checkpoint
   * saved — only if the store still names its generation the holder.
   */
  const fenced = (hold: LeaseHold | undefined): Error | null =>
    hold?.valid === undefined || hold.valid()
      ? null
      : new Error(`relay lease generation ${hold.generation} is past its bound: not publishing`);

  /**
   * One declaration to the broker. With tracing on, a span in the send's trace (found by digest,
   * when this engine recorded the send) whose context travels in the message's `traceparent`.
   */
  async function publish(e: Recorded<DeclarationSent>, hold: LeaseHold | undefined): Promise<void> {
    // The publisher asks right before it writes: the lease's bound, and the moment counted as issued.
    const fence = (): boolean => {
      if (hold?.valid !== undefined && !hold.valid()) return false;
      metrics?.relayIssued.inc();
      return true;
    };
    const out = { ...outboundOf(e), fence };
    const t = tracer();
    if (!t.enabled) return publisher.publish(out);
    const span = t.start('converge.relay.publish', {
      kind: 'producer',
      parent: digestKey(e.data.digest),
      attributes: {
        [attr.digest]: e.data.digest,
        [attr.node]: e.data.node,
        [attr.serial]: e.data.serial,
        [attr.position]: String(e.position),
      },
    });
    try {
      await publisher.publish({ ...out, traceparent: span.traceparent()! });
      span.end();
    } catch (err) {
      span.end(err);
      throw err;
    }
  }

  const subscribe = (hold?: LeaseHold): Subscription =>
    store.subscribe({
      checkpoint: options.checkpoint ?? 'relay',
      types: ['DeclarationSent'],
      batchSize: options.batchSize ?? 100,
      handler: async (events) => {
        const log = logger.child({ from: String(events[0]?.position), size: events.length });
        // Nodes in parallel, each node's declarations one after another in store order: a
        // node applies what reaches its inbox in that order, and an older declaration
        // overtaking a newer one would leave it on words we have since replaced.
        const byNode = new Map<string, Recorded<DeclarationSent>[]>();
        for (const e of events) {
          if (e.type !== 'DeclarationSent') continue;
          const list = byNode.get(e.data.node);
          if (list === undefined) byNode.set(e.data.node, [e as Recorded<DeclarationSent>]);
          else list.push(e as Recorded<DeclarationSent>);
        }
        try {
          await Promise.all(
            [...byNode.values()].map(async (list) => {
              for (const e of list) {
                const stop = fenced(hold);
                if (stop !== null) throw stop;
                await publish(e, hold);
                metrics?.relayPublished.inc();
              }
            }),
          );
          if (hold?.current !== undefined && !(await hold.current())) {
            throw new Error(`relay lease generation ${hold.generation} is no longer current: the batch is left to the holder`);
          }
        } catch (err) {
          const message = err instanceof Error ? err.message : String(err);
          health = { ...health, healthy: false, failingSince: health.failingSince ?? new Date(), error: message };
          metrics?.relayHealthy.set(0);
          throw err;
        }
        log.debug({}, 'declarations confirmed');
        if (!health.healthy) logger.info({}, 'relay publishing again');
        health = { healthy: true, lastSuccessAt: new Date(), failingSince: null, error: null };
        metrics?.relayHealthy.set(1);
      },
      onError: (err) => logger.warn({ err: (err as Error).message }, 'relay batch failed; retrying from the checkpoint'),
    });

  /** Resolves once `signal` aborts, at once if it already has. */
  const stopped = (signal: AbortSignal): Promise<void> =>
    new Promise((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true })));

  // On a store several engines share, only the engine holding the relay lease
  // publishes, so a second engine does not double every declaration. It takes over from the
  // checkpoint when the holder dies; the batch the holder had in flight may go out twice, which
  // the at-least-once contract above already allows (nodes recognise a repeat by digest).
  const leasedRelay = (signal: AbortSignal): Promise<void> =>
    whileLeased({
      store,
      name: 'relay',
      signal,
      logger,
      taken: 'relay lease taken: this engine publishes declarations',
      lost: 'relay lease lost: another engine may publish now; waiting to take it again',
      run: async (held, hold) => {
        if (options.fenceBroker !== undefined && (hold?.takenFrom === 'gone' || hold?.takenFrom === 'stale')) {
          logger.info({ takenFrom: hold.takenFrom }, 'relay lease taken from a holder that did not give it up: fencing the broker first');
          await options.fenceBroker(held);
          if (held.aborted) return;
        }
        sub = subscribe(hold);
        await stopped(held);
        await sub.stop();
        sub = null;
      },
    });

  let abort: AbortController | null = null;
  let leased: Promise<void> | null = null;
  return {
    start: () => {
      if (sub !== null || abort !== null) return;
      if (store.acquireLease === undefined) {
        sub = subscribe();
        return;
      }
      abort = new AbortController();
      leased = leasedRelay(abort.signal);
    },
    stop: async () => {
      abort?.abort();
      await leased;
      abort = null;
      leased = null;
      await sub?.stop();
      sub = null;
    },
    position: () => sub?.position() ?? null,
    isCaughtUp: () => sub?.isCaughtUp() ?? false,
    active: () => sub !== null,
    health: () => health,
  };
}
