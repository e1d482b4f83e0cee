import type { Channel } from 'amqplib';
import type { Logger } from 'pino';
import { isConvergeError } from '../core/errors.ts';
import type { AmqpConnection } from './amqpConnection.ts';
import { nodeQueueOf } from './brokerNames.ts';
import { createTokenBucket } from './tokenBucket.ts';
import { assertTopology, isNotFound, nodeTopology } from './topology.ts';
import type { InboxKind } from './topology.ts';

// Node inboxes declared at a bounded rate, each once per connection (docs/transport.md#node-inboxes).
// A broker asked for thousands of new queues at once spends itself on them and stops answering
// new AMQP handshakes (a restarted engine's included), so making an inbox waits for a token.
// An inbox that exists (made by `node enroll` ahead of need, or before a restart) costs no token:
// a passive check finds it and a re-declaration of the queue alone checks its form, each thousands
// a second here, where making one and binding it runs at about a hundred (docs/operations.md#sizing-the-broker).
//
// Which inboxes are declared is kept in memory, per connection: the broker is the authority on
// what exists (it may have been reset, or the engine moved to another cluster node), so a new
// connection starts with an empty set, and an engine restart re-declares only the inboxes it
// publishes to — paced like the rest. A durable set would skip an inbox a reset broker lost.
//
// One declaration at a time per channel (a few channels side by side): an inbox that exists with other arguments
// (made by an earlier Converge) makes the broker refuse and close the channel it came on, which
// must not be a channel other work is in flight on. Such an inbox is still a working inbox: it is
// bound and used as it is, with a warning once per node (CONVERGE_ERR_INBOX_OUTDATED).

/** Declarations of new inboxes a second by default; see docs/operations.md#sizing-the-broker. */
export const defaultInboxDeclareRate = 100;
/** Channels checking and declaring inboxes side by side (measured: one channel checks ~2,400 a second here, 4 ~4,000). */
export const defaultInboxLanes = 4;

export type InboxDeclarerOptions = Readonly<{
  logger: Logger;
  /** The inbox form (default classic, topology.ts). */
  inbox?: InboxKind;
  /** New inboxes declared a second at most (default defaultInboxDeclareRate). */
  ratePerSecond?: number;
  /** New inboxes declared at once after a quiet spell (default: a tenth of the rate, at least 1). */
  burst?: number;
  /** Channels declaring side by side (default defaultInboxLanes); new inboxes share one bucket. */
  lanes?: number;
}>;

export type InboxDeclarer = Readonly<{
  /** Resolves once `node`'s inbox exists and is bound (at once if declared on this connection). */
  declare: (node: string) => Promise<void>;
  /** The inbox went away (a publish came back unroutable): the next declare asserts it again. */
  forget: (node: string) => void;
  /** Inboxes declared on the live connection. */
  declaredCount: () => number;
  close: () => Promise<void>;
}>;

export function createInboxDeclarer(conn: AmqpConnection, options: InboxDeclarerOptions): InboxDeclarer {
  const { logger } = options;
  const rate = options.ratePerSecond ?? defaultInboxDeclareRate;
  const bucket = createTokenBucket({ ratePerSecond: rate, burst: options.burst ?? Math.max(1, Math.round(rate / 10)) });
  const kind = options.inbox ?? 'classic';
  /** Declared (or being declared) on connection `generation`. */
  let declared = new Map<string, Promise<void>>();
  let generation = conn.generation();
  /** Nodes already logged as having an outdated inbox (once per node per process). */
  const outdated = new Set<string>();
  /**
   * Declarations run one at a time per lane, each lane on a channel of its own, so a refusal (or a
   * passive check's 404) closes the channel under no one else's; several lanes let the checks of
   * inboxes that exist run side by side.
   */
  type Lane = { declaring: Promise<Channel> | null; line: Promise<unknown> };
  const lanes: Lane[] = Array.from({ length: options.lanes ?? defaultInboxLanes }, () => ({ declaring: null, line: Promise.resolve() }));
  let nextLane = 0;

  const channel = (lane: Lane): Promise<Channel> => {
    if (lane.declaring !== null) return lane.declaring;
    const opening: Promise<Channel> = conn.createChannel().then((ch) => {
      // A refusal arrives as the rejected call and as this event; the call is where it is handled.
      ch.on('error', () => undefined);
      ch.on('close', () => {
        if (lane.declaring === opening) lane.declaring = null;
      });
      return ch;
    });
    lane.declaring = opening;
    return opening;
  };

  /** Nodes whose publish came back unroutable: their binding may be gone, so the next declare binds again. */
  const rebind = new Set<string>();

  /** True when the inbox exists: its form checked by re-declaring the queue (no binding, no token). */
  const existing = async (lane: Lane, node: string): Promise<boolean> => {
    const queue = nodeTopology(node, kind).queues[0]!;
    try {
      await (await channel(lane)).checkQueue(queue.name);
    } catch (err) {
      lane.declaring = null; // a 404 closes the channel
      if (isNotFound(err)) return false;
      throw err;
    }
    await assertTopology(await channel(lane), { exchanges: [], queues: [queue], bindings: [] });
    return true;
  };

  const assertInbox = async (lane: Lane, node: string): Promise<void> => {
    const topology = nodeTopology(node, kind);
    try {
      if (!rebind.delete(node) && (await existing(lane, node))) return;
      await bucket.take(conn.closed);
      await assertTopology(await channel(lane), topology);
    } catch (err) {
      lane.declaring = null;
      if (!isConvergeError(err, 'CONVERGE_ERR_TOPOLOGY_CONFLICT')) throw err;
      // It exists in another form: make sure it is bound (as it was when it was made) and use it.
      const ch = await channel(lane);
      for (const b of topology.bindings) await ch.bindQueue(b.queue, b.exchange, b.routingKey);
      if (!outdated.has(node)) {
        outdated.add(node);
        const name = nodeQueueOf(node);
        logger.warn(
          { code: 'CONVERGE_ERR_INBOX_OUTDATED', node, queue: name, err: (err as Error).message },
          `inbox ${name} exists with other arguments than this Converge declares (an earlier version's); declarations are published to it as it is. Run \`converge broker migrate-inboxes\` to bring the inboxes to the current form (docs/operations.md)`,
        );
      }
    }
  };

  const current = (): Map<string, Promise<void>> => {
    const g = conn.generation();
    if (g !== generation) {
      // A new connection: the broker may be another, or reset; nothing it holds is assumed.
      generation = g;
      declared = new Map();
    }
    return declared;
  };

  return {
    declare: (node) => {
      const set = current();
      const known = set.get(node);
      if (known !== undefined) return known;
      const lane = lanes[nextLane++ % lanes.length]!;
      const run = (): Promise<void> => assertInbox(lane, node);
      const next = lane.line.then(run, run);
      lane.line = next.catch(() => undefined);
      set.set(node, next);
      // A failed declaration is not remembered: the relay's retry declares it again.
      next.catch(() => {
        if (set.get(node) === next) set.delete(node);
      });
      return next;
    },
    forget: (node) => {
      current().delete(node);
      rebind.add(node);
    },
    declaredCount: () => current().size,
    close: async () => {
      for (const lane of lanes) {
        const ch = lane.declaring;
        lane.declaring = null;
        await ch?.then((c) => c.close()).catch(() => undefined);
      }
    },
  };
}
