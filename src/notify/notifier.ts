import type { Logger } from 'pino';
import { foldNode, foldNodeEvents, initialNodeState } from '../../projections/index.ts';
import type { NodeState } from '../../projections/index.ts';
import { isNodeEvent, rolloutEventTypes, streamOf } from '../core/events/index.ts';
import type { Recorded, RolloutEvent } from '../core/events/index.ts';
import type { FoldFailure, NodeChange, ReadModel } from '../readModel/readModelTypes.ts';
import type { Clock } from '../retry.ts';
import type { EventStore } from '../store/index.ts';
import { createDestination } from './destination.ts';
import type { Destination, Fetch } from './destination.ts';
import { matches } from './notifyConfig.ts';
import type { DestinationConfig, NotifyConfig } from './notifyConfig.ts';
import { nodeTriggers, notificationId, rolloutTrigger, triggerSeverity } from './triggers.ts';
import { createWatch } from './watch.ts';
import type { PipelineHealth, Watch } from './watch.ts';
import type { Notification } from './triggers.ts';

// Notifications with the store as the outbox: triggers are read from the read model's changes as
// events fold, each destination keeps a cursor in the store, and a restart derives again, from the
// events after the oldest cursor, what was not yet delivered. Events the restored snapshot already
// holds are refolded here from their nodes' streams (`replayGap`): their notifications have the
// same ids as the first time, so what a receiver had is a duplicate it drops.
//
// Order of use (src/app/lifecycle.ts): `prepare` (cursors) and the listeners before the projections
// start, so no change goes unheard; `begin` once they have restored their snapshot.

export type Notifier = Readonly<{
  destinations: readonly Destination[];
  /** The timer of the time and health triggers (null: no `watch` in the file). */
  watch: Watch | null;
  prepare: () => Promise<void>;
  begin: () => Promise<void>;
  stop: () => Promise<void>;
}>;

export type NotifierOptions = Readonly<{
  config: NotifyConfig;
  store: EventStore;
  readModel: ReadModel;
  logger: Logger;
  fetch?: Fetch;
  now?: () => number;
  /** Ingest's and the relay's health, for the health triggers (watch.ts). */
  health?: PipelineHealth;
  /** serve's --grace-ms: which restored nodes are disconnected. */
  graceMs?: number;
  /** Monotonic ms for the time triggers (tests). */
  mono?: () => number;
  /** Each destination's time: its backoff, coalescing windows and cursor pace (tests; default the real clock). */
  clock?: Clock;
}>;

export function createNotifier(options: NotifierOptions): Notifier {
  const { store, readModel } = options;
  const log = options.logger.child({ component: 'notify' });
  const pairs: [Destination, DestinationConfig][] = options.config.destinations.map((c) => [
    createDestination({
      config: c,
      store,
      logger: options.logger,
      ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
      ...(options.now === undefined ? {} : { now: options.now }),
      ...(options.clock === undefined ? {} : { clock: options.clock }),
    }),
    c,
  ]);
  /** Until `begin` has replayed the gap, what folds live waits here. */
  let buffered: { notes: Notification[]; position: bigint }[] | null = [];
  let unsubscribe: (() => void)[] = [];

  function dispatch(notes: readonly Notification[], position: bigint): void {
    for (const [d, c] of pairs) {
      for (const n of notes) if (matches(c.filter, n)) d.offer(n);
      d.advance(position);
    }
  }
  const w = options.config.watch;
  const watch: Watch | null =
    w === undefined
      ? null
      : createWatch({
          config: w,
          store,
          readModel,
          logger: options.logger,
          // Not a position the cursor moves by: offered to each destination that wants it, no more.
          offer: (n) => {
            for (const [d, c] of pairs) if (matches(c.filter, n)) d.offer(n);
          },
          health: options.health,
          graceMs: options.graceMs,
          mono: options.mono,
          now: options.now,
        });
  function hear(notes: Notification[], position: bigint): void {
    if (buffered !== null) buffered.push({ notes, position });
    else dispatch(notes, position);
  }

  const onChange = (c: NodeChange): void => hear(nodeTriggers(c.previous, c.state, c.event), c.position);
  const onRollout = (e: Recorded<RolloutEvent>): void => {
    const n = rolloutTrigger(e);
    hear(n === null ? [] : [n], e.position);
  };
  const onFailure = (f: FoldFailure): void => {
    const n: Notification = {
      id: notificationId(f.id, 'projection.failed'),
      trigger: 'projection.failed',
      severity: triggerSeverity['projection.failed'],
      position: f.position,
      eventId: f.id,
      time: new Date((options.now ?? Date.now)()).toISOString(),
      node: f.node,
      rollout: null,
      specDigest: null,
      summary: `projections stopped: the fold failed on event ${f.id} (${f.type}) at position ${f.position}: ${f.message}`,
      facts: { type: f.type, position: f.position.toString(), message: f.message },
    };
    // Past the cursor's reach on purpose: the fold stops before this event, so the cursor never passes it.
    for (const [d, c] of pairs) if (matches(c.filter, n)) d.offer(n);
  };

  /** Notifications for events in (after, until] from the store: each node's state before them refolded from its stream. */
  async function replayGap(after: bigint, until: bigint): Promise<void> {
    const states = new Map<string, NodeState>();
    let count = 0;
    for await (const batch of store.readAll({ after })) {
      for (const e of batch) {
        if (e.position > until)
          return void log.info(
            { after: after.toString(), until: until.toString(), notifications: count },
            'notifications derived again after restart',
          );
        let notes: Notification[] = [];
        if ((rolloutEventTypes as readonly string[]).includes(e.type)) {
          const n = rolloutTrigger(e as Recorded<RolloutEvent>);
          if (n !== null) notes = [n];
        } else if (isNodeEvent(e)) {
          const node = e.data.node;
          let previous = states.get(node);
          if (previous === undefined) {
            const earlier = (await store.readStream(streamOf(node))).filter((x) => x.position <= after);
            previous = earlier.length === 0 ? undefined : foldNodeEvents(node, earlier);
          }
          const next = foldNode(previous ?? initialNodeState(node), e);
          states.set(node, next);
          notes = nodeTriggers(previous, next, e);
        }
        count += notes.length;
        dispatch(notes, e.position);
      }
    }
  }

  return {
    destinations: pairs.map(([d]) => d),
    watch,
    async prepare() {
      const head = (await store.headPosition()) ?? 0n;
      for (const [d] of pairs) await d.load(head);
      unsubscribe = [readModel.onChange(onChange), readModel.onRolloutEvent(onRollout), readModel.onFailure(onFailure)];
      log.info({ destinations: pairs.map(([d]) => ({ name: d.name, cursor: d.cursor()?.toString() ?? null })) }, 'notifications on');
    },
    async begin() {
      const restored = readModel.position() ?? 0n;
      const oldest = pairs.reduce<bigint | null>((m, [d]) => {
        const c = d.cursor() ?? restored;
        return m === null || c < m ? c : m;
      }, null);
      if (oldest !== null && oldest < restored) {
        try {
          await replayGap(oldest, restored);
        } catch (err) {
          log.error({ err }, 'could not derive again the notifications before the snapshot; they are not sent');
        }
      }
      const waiting = buffered ?? [];
      buffered = null;
      for (const b of waiting) if (b.position > restored) dispatch(b.notes, b.position);
      for (const [d] of pairs) d.start();
      watch?.begin();
    },
    async stop() {
      await watch?.stop();
      for (const u of unsubscribe) u();
      await Promise.all(pairs.map(([d]) => d.stop()));
    },
  };
}
