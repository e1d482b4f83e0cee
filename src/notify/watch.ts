import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import { livenessAt } from '../../projections/index.ts';
import type { NodeState } from '../../projections/index.ts';
import { uuidV5 } from '../core/events/index.ts';
import type { ComponentHealth } from '../engine/health.ts';
import type { NodeChange, ReadModel } from '../readModel/readModelTypes.ts';
import type { EventStore } from '../store/index.ts';
import { triggerSeverity } from './triggers.ts';
import type { Notification, TriggerName } from './triggers.ts';

// Triggers on time alone and on health (docs/operations.md "Notifications"): a node behind its
// latest declaration, or disconnected, for longer than a threshold; ingest or the relay unhealthy
// for longer than one. No event says "ten minutes have passed", so a timer looks, on the
// monotonic clock: an episode begins when this process sees it begin (a change folded, a health
// turning bad, or — after a restart — the state restored), and fires once it has lasted the
// threshold. Elapsed time is never read from the wall clock, which a step can move.
//
// Once per episode, across restarts: an episode has an identity (the node's digest it is behind
// on, the last-seen time it went silent at, the failingSince of a component), and before it is
// offered the watch records it fired, in a store checkpoint `notify-fired:<trigger>:<subject>`
// holding that identity as a number. An episode whose identity is not above the recorded one has
// fired already, in this process or an earlier one, and is not offered again.

export type WatchConfig = Readonly<{
  behindMs?: number | undefined;
  disconnectedMs?: number | undefined;
  unhealthyMs?: number | undefined;
  checkMs: number;
}>;

export type PipelineHealth = () => Readonly<{ ingest: ComponentHealth | null; relay: ComponentHealth | null }>;

export type WatchOptions = Readonly<{
  config: WatchConfig;
  store: EventStore;
  readModel: ReadModel;
  logger: Logger;
  /** Where a fired notification goes (the notifier's dispatch to matching destinations). */
  offer: (n: Notification) => void;
  health?: PipelineHealth | undefined;
  /** The grace after which a silent node is disconnected (serve's --grace-ms). */
  graceMs?: number | undefined;
  /** Monotonic ms (default performance.now), for elapsed time. */
  mono?: (() => number) | undefined;
  /** Wall-clock ms (default Date.now), for the message's time, and the liveness at restart of a node with no transition. */
  now?: (() => number) | undefined;
}>;

export type Watch = Readonly<{
  /** Episodes under way in what is restored, then hear changes; the timer starts. */
  begin: () => void;
  stop: () => Promise<void>;
  /** Checks made so far (tests wait on it). */
  checks: () => number;
}>;

type Episode = { trigger: TriggerName; subject: string; identity: bigint; since: number; state: NodeState | null; detail: string };

export const firedCheckpointOf = (trigger: TriggerName, subject: string): string => `notify-fired:${trigger}:${subject}`;

export function createWatch(options: WatchOptions): Watch {
  const { config, store, readModel } = options;
  const mono = options.mono ?? (() => performance.now());
  const now = options.now ?? Date.now;
  const log = options.logger.child({ component: 'notify-watch' });
  /** Episodes under way, by `trigger subject`. */
  const open = new Map<string, Episode>();
  /** Identities fired (or found fired) in this process, by the same key: no store read for them. */
  const fired = new Map<string, bigint>();
  let timer: NodeJS.Timeout | null = null;
  let checking: Promise<void> | null = null;
  let checks = 0;
  let unsubscribe: (() => void) | null = null;

  const keyOf = (trigger: TriggerName, subject: string): string => `${trigger} ${subject}`;
  function begin(e: Omit<Episode, 'since'>): void {
    const k = keyOf(e.trigger, e.subject);
    const was = open.get(k);
    if (was !== undefined && was.identity === e.identity) return;
    open.set(k, { ...e, since: mono() });
  }
  const end = (trigger: TriggerName, subject: string): void => void open.delete(keyOf(trigger, subject));

  function hearNode(s: NodeState, silentNow: boolean): void {
    if (config.behindMs !== undefined) {
      if (s.status === 'behind' && s.sent !== null && s.retiredAt === null)
        begin({ trigger: 'node.behind', subject: s.node, identity: BigInt(s.sent.serial), state: s, detail: s.sent.digest });
      else end('node.behind', s.node);
    }
    if (config.disconnectedMs !== undefined) {
      if (silentNow && s.lastSeenAt !== null && s.retiredAt === null)
        begin({
          trigger: 'node.disconnected',
          subject: s.node,
          identity: BigInt(Date.parse(s.lastSeenAt)),
          state: s,
          detail: s.lastSeenAt,
        });
      else end('node.disconnected', s.node);
    }
  }
  /**
   * Silent at a start, by the record (docs/design.md §3 "Liveness as recorded"): a node that stays
   * alive appends nothing after its NodeHeard, so its folded last-seen time says nothing of now.
   * Only a node with no transition folded (a store written before them) is judged by the grace.
   */
  const silentAt = (s: NodeState, wall: number): boolean => {
    const last = readModel.transitionOf(s.node);
    return last === null ? livenessAt(s.lastSeenAt, wall, options.graceMs).state === 'disconnected' : last === 'silent';
  };
  const onChange = (c: NodeChange): void => {
    // Silent from a NodeSilent folded until any later sign of life; other events leave it as it is.
    const silent =
      c.event.type === 'NodeSilent' || (open.has(keyOf('node.disconnected', c.node)) && c.state.lastSeenAt === c.previous?.lastSeenAt);
    hearNode(c.state, silent);
  };

  function hearHealth(): void {
    if (config.unhealthyMs === undefined || options.health === undefined) return;
    const h = options.health();
    for (const [component, trigger] of [
      ['ingest', 'ingest.unhealthy'],
      ['relay', 'relay.unhealthy'],
    ] as const) {
      const c = h[component];
      if (c !== null && !c.healthy && c.failingSince !== null)
        begin({ trigger, subject: component, identity: BigInt(c.failingSince.getTime()), state: null, detail: c.error ?? '' });
      else end(trigger, component);
    }
  }

  const thresholdOf = (t: TriggerName): number =>
    (t === 'node.behind' ? config.behindMs : t === 'node.disconnected' ? config.disconnectedMs : config.unhealthyMs) ?? Infinity;

  /** Record the episode fired unless it already was; true: offer it now. */
  async function claim(e: Episode): Promise<boolean> {
    const k = keyOf(e.trigger, e.subject);
    const known = fired.get(k) ?? (await store.getCheckpoint(firedCheckpointOf(e.trigger, e.subject)));
    if (known !== null && known >= e.identity) {
      fired.set(k, known);
      return false;
    }
    await store.setCheckpoint(firedCheckpointOf(e.trigger, e.subject), e.identity);
    fired.set(k, e.identity);
    return true;
  }

  async function check(): Promise<void> {
    hearHealth();
    const at = mono();
    for (const [k, e] of [...open]) {
      const lasted = at - e.since;
      if (lasted < thresholdOf(e.trigger)) continue;
      open.delete(k);
      try {
        if (await claim(e)) options.offer(notificationOf(e, lasted, new Date(now()).toISOString(), readModel.position() ?? 0n));
      } catch (err) {
        // The store could not say or record it: try again at the next check rather than risk a repeat.
        open.set(k, e);
        log.warn(
          { err: (err as Error).message, trigger: e.trigger, subject: e.subject },
          'could not record a notification fired; will retry',
        );
      }
    }
    checks++;
  }

  return {
    begin() {
      if (config.behindMs !== undefined || config.disconnectedMs !== undefined) {
        const wall = now();
        for (const s of readModel.nodes()) hearNode(s, silentAt(s, wall));
        unsubscribe = readModel.onChange(onChange);
      }
      timer = setInterval(() => {
        checking ??= check().finally(() => (checking = null));
      }, config.checkMs);
      timer.unref();
    },
    async stop() {
      unsubscribe?.();
      if (timer !== null) clearInterval(timer);
      await checking;
    },
    checks: () => checks,
  };
}

function notificationOf(e: Episode, lastedMs: number, time: string, position: bigint): Notification {
  const minutes = (lastedMs / 60_000).toFixed(1);
  const s = e.state;
  const base = {
    id: uuidV5(`Notification/${e.trigger}/${e.subject}/${e.identity}`),
    trigger: e.trigger,
    severity: triggerSeverity[e.trigger],
    position,
    timed: true,
    eventId: '',
    time,
    rollout: null,
  } as const;
  switch (e.trigger) {
    case 'node.behind':
      return {
        ...base,
        node: e.subject,
        specDigest: s?.sent?.specDigest ?? null,
        summary: `node ${e.subject} has been behind declaration serial ${e.identity} for ${minutes} min`,
        facts: { digest: e.detail, serial: Number(e.identity), sentAt: s?.sent?.sentAt ?? null, behindForMs: Math.round(lastedMs) },
      };
    case 'node.disconnected':
      return {
        ...base,
        node: e.subject,
        specDigest: s?.sent?.specDigest ?? null,
        summary: `node ${e.subject} has been disconnected for ${minutes} min (last seen ${e.detail})`,
        facts: { lastSeenAt: e.detail, disconnectedForMs: Math.round(lastedMs) },
      };
    default:
      return {
        ...base,
        node: null,
        specDigest: null,
        summary: `${e.subject} has been unhealthy for ${minutes} min: ${e.detail}`,
        facts: {
          component: e.subject,
          failingSince: new Date(Number(e.identity)).toISOString(),
          error: e.detail,
          unhealthyForMs: Math.round(lastedMs),
        },
      };
  }
}
