import type { Logger } from 'pino';
import { realClock, retry } from '../retry.ts';
import type { Clock } from '../retry.ts';
import type { EventStore } from '../store/index.ts';
import { cloudEvent, sign, signatureHeader, single, slackBody, summary, timestampHeader } from './message.ts';
import type { Message } from './message.ts';
import type { DestinationConfig } from './notifyConfig.ts';
import type { Notification, TriggerName } from './triggers.ts';

// One destination: a bounded queue in memory, one delivery loop, a durable cursor. `offer` is
// synchronous and O(1), so the fold (and ingest behind it) never waits on a receiver; the loop
// delivers in position order, retrying a failure with backoff until it succeeds or is stopped.
// The cursor (a named checkpoint in the store) is the position before the oldest notification not
// yet delivered, written at most once a second: a restart derives again what is after it (what
// was delivered in that second is sent again, with the same ids) and sends nothing before it.
//
// Coalescing, per trigger: at most `maxPerWindow` messages of one notification each per
// `windowMs`; past that, the loop waits for the window to end and sends everything of that
// trigger then queued as one summary (its count, the first `firstNodes`, the positions it spans),
// and the window after a summary admits no single message. A full queue (`queueLimit`) keeps
// counting: later notifications go to one summary per trigger sent once the queue has drained.

export type Fetch = typeof fetch;

export type DestinationStats = Readonly<{ queued: number; overflowed: number; delivered: number; failures: number; cursor: string | null }>;

export type Destination = Readonly<{
  name: string;
  checkpoint: string;
  /** The cursor at start (null before `load`). */
  cursor: () => bigint | null;
  /** Read the saved cursor; a destination never seen before starts at `head` (the past is not sent). */
  load: (head: bigint) => Promise<bigint>;
  /** Queue a notification (its position past the cursor): never blocks. */
  offer: (n: Notification) => void;
  /** Everything up to `position` has been offered: with nothing queued, the cursor may move there. */
  advance: (position: bigint) => void;
  start: () => void;
  stop: () => Promise<void>;
  stats: () => DestinationStats;
  /** Send one message now, outside the queue and the cursor (`converge notify test`). */
  sendNow: (m: Message) => Promise<void>;
}>;

export type DestinationOptions = Readonly<{
  config: DestinationConfig;
  store: EventStore;
  logger: Logger;
  fetch?: Fetch;
  /** Wall-clock ms for a signature's timestamp. */
  now?: () => number;
  /** Monotonic time and sleep for the backoff, the coalescing windows and the cursor's pace (default: the real ones). */
  clock?: Clock;
}>;

const idleSaveMs = 1000;

export const checkpointOf = (name: string): string => `notify:${name}`;

export function createDestination(options: DestinationOptions): Destination {
  const { config, store } = options;
  const doFetch = options.fetch ?? fetch;
  const now = options.now ?? Date.now;
  const clock = options.clock ?? realClock;
  const log = options.logger.child({ component: 'notify', destination: config.name });
  const checkpoint = checkpointOf(config.name);
  let queue: Notification[] = [];
  let head = 0;
  const overflow = new Map<TriggerName, { first: Notification[]; count: number; last: Notification }>();
  let overflowed = 0;
  /**
   * The first position of a spill's summary being delivered: taken out of `overflow` when it is
   * made, so what spills meanwhile starts a new count instead of being deleted with it, and held
   * here so the cursor stays before it until it is delivered.
   */
  let sending: bigint | null = null;
  let seen: bigint | null = null;
  let saved: bigint | null = null;
  /** When the cursor was last written (monotonic ms). */
  let savedAt = -Infinity;
  let delivered = 0;
  let failures = 0;
  const windows = new Map<TriggerName, { start: number; sent: number }>();
  const stopper = new AbortController();
  let loop: Promise<void> | null = null;
  let wake: (() => void) | null = null;
  const poke = (): void => {
    const w = wake;
    wake = null;
    w?.();
  };
  const queued = (): number => queue.length - head;

  const post = (m: Message): Promise<number> => postMessage(config, m, { fetch: doFetch, now, signal: stopper.signal });

  async function deliver(m: Message): Promise<boolean> {
    const r = await retry(() => post(m), {
      minMs: config.retry.minMs,
      maxMs: Math.max(config.retry.minMs, config.retry.maxMs),
      jitter: 0.2,
      signal: stopper.signal,
      sleep: clock.sleep,
      onError: (err, attempt) => {
        failures++;
        // The URL may carry a token (Slack's do): only its origin is logged.
        log.warn(
          { err: (err as Error).message, attempt, id: m.id, trigger: m.trigger, to: new URL(config.url).origin },
          'notification not delivered; retrying',
        );
        return true;
      },
    });
    return r.ok;
  }

  /** The position before the oldest notification not delivered, or the last position offered. */
  function cursorNow(): bigint | null {
    const pending = [queue[head]?.position, sending ?? undefined, ...[...overflow.values()].map((o) => o.first[0]!.position)].filter(
      (p) => p !== undefined,
    );
    if (pending.length === 0) return seen;
    return pending.reduce((a, b) => (a < b ? a : b)) - 1n;
  }

  async function save(): Promise<void> {
    const c = cursorNow();
    if (c === null || (saved !== null && c <= saved)) return;
    try {
      savedAt = clock.now();
      await store.setCheckpoint(checkpoint, c);
      saved = c;
    } catch (err) {
      log.warn({ err }, 'notification cursor not saved; a restart may send some again');
    }
  }

  /** The next message to send, taking its notifications off the queue once it is delivered. */
  async function next(): Promise<{ message: Message; take: () => void } | null> {
    const first = queue[head];
    if (first === undefined) {
      const [trigger, o] = overflow.entries().next().value ?? [];
      if (trigger === undefined || o === undefined) return null;
      overflow.delete(trigger);
      sending = o.first[0]!.position;
      return {
        message: summary(o.first, config.coalesce.firstNodes, o.count, o.last),
        take: () => {
          sending = null;
        },
      };
    }
    const { windowMs, maxPerWindow, firstNodes } = config.coalesce;
    let w = windows.get(first.trigger);
    const t = clock.now();
    if (w === undefined || t - w.start >= windowMs) windows.set(first.trigger, (w = { start: t, sent: 0 }));
    if (w.sent < maxPerWindow) {
      const win = w;
      return {
        message: single(first),
        take: () => {
          win.sent++;
          queue[head++] = undefined as unknown as Notification;
          compact();
        },
      };
    }
    await clock.sleep(Math.max(0, w.start + windowMs - clock.now()), stopper.signal);
    if (stopper.signal.aborted) return null;
    const all = queue.slice(head).filter((n) => n.trigger === first.trigger);
    return {
      message: summary(all, firstNodes),
      take: () => {
        const taken = new Set(all);
        queue = queue.slice(head).filter((n) => !taken.has(n));
        head = 0;
        windows.set(first.trigger, { start: clock.now(), sent: maxPerWindow });
      },
    };
  }

  function compact(): void {
    if (head > 1024 && head * 2 > queue.length) {
      queue = queue.slice(head);
      head = 0;
    }
  }

  /** Until an offer wakes the loop or a second has passed; the timer is cleared on wake, so none is left behind. */
  async function idle(): Promise<void> {
    const woken = new AbortController();
    // stop() pokes too, so the loop's own signal is not needed here.
    const timer = clock.sleep(idleSaveMs, woken.signal);
    await Promise.race([new Promise<void>((resolve) => (wake = resolve)), timer]);
    woken.abort();
  }

  async function run(): Promise<void> {
    while (!stopper.signal.aborted) {
      const step = await next();
      if (step === null) {
        await save();
        if (stopper.signal.aborted) break;
        // Idle: the cursor follows what was offered at most once a second (a store write per event was too many).
        if (queued() === 0 && overflow.size === 0) await idle();
        continue;
      }
      if (!(await deliver(step.message))) break;
      delivered++;
      log.debug({ id: step.message.id, trigger: step.message.trigger, count: step.message.count }, 'notification delivered');
      step.take();
      // Busy: the cursor moves at most once a second too. A write per delivery (a commit, an fsync
      // on SQLite) capped a destination below 200 messages/s on a loaded disk and the queue grew;
      // a crash now re-sends at most a second of deliveries, each with its own id.
      if (clock.now() - savedAt >= idleSaveMs) await save();
    }
  }

  return {
    name: config.name,
    checkpoint,
    cursor: () => saved,
    async load(headPosition) {
      const c = await store.getCheckpoint(checkpoint);
      if (c !== null) {
        saved = seen = c;
        return c;
      }
      await store.setCheckpoint(checkpoint, headPosition);
      saved = seen = headPosition;
      return headPosition;
    },
    offer(n) {
      if (n.timed !== true && saved !== null && n.position <= saved) return;
      if (overflow.size === 0 && queued() < config.queueLimit) queue.push(n);
      else {
        // Full: counted, not kept; once overflowing, everything goes here so order holds.
        overflowed++;
        const o = overflow.get(n.trigger);
        if (o === undefined) overflow.set(n.trigger, { first: [n], count: 1, last: n });
        else {
          o.count++;
          o.last = n;
          if (o.first.length < config.coalesce.firstNodes) o.first.push(n);
        }
      }
      if (n.timed !== true && (seen === null || n.position > seen)) seen = n.position;
      poke();
    },
    advance(position) {
      if (seen === null || position > seen) seen = position;
    },
    start() {
      loop ??= run().catch((err: unknown) => log.error({ err }, 'notification delivery stopped'));
    },
    async stop() {
      stopper.abort();
      poke();
      await loop;
      await save();
    },
    stats: () => ({ queued: queued(), overflowed, delivered, failures, cursor: saved === null ? null : saved.toString() }),
    sendNow: async (m) => {
      await post(m);
    },
  };
}

/** POST one message to a destination, signed when it has a secret; resolves with the HTTP status, throws on a non-2xx answer. */
export async function postMessage(
  config: DestinationConfig,
  m: Message,
  options: Readonly<{ fetch?: Fetch; now?: () => number; signal?: AbortSignal }> = {},
): Promise<number> {
  const body = config.kind === 'slack' ? slackBody(m) : cloudEvent(m);
  const headers: Record<string, string> = {
    'content-type': config.kind === 'slack' ? 'application/json' : 'application/cloudevents+json',
    'user-agent': 'converge-notify',
  };
  if (config.secretValue !== null) {
    const ts = Math.floor((options.now ?? Date.now)() / 1000);
    headers[timestampHeader] = String(ts);
    headers[signatureHeader] = sign(config.secretValue, ts, body);
  }
  const timeout = AbortSignal.timeout(config.timeoutMs);
  const res = await (options.fetch ?? fetch)(config.url, {
    method: 'POST',
    headers,
    body,
    signal: options.signal === undefined ? timeout : AbortSignal.any([timeout, options.signal]),
  });
  // The body is read so the connection is reused; its text names the failure.
  const text = await res.text().catch(() => '');
  if (!res.ok) throw new Error(`HTTP ${res.status} ${text.slice(0, 200)}`);
  return res.status;
}
