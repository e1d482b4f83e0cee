import type { Channel } from 'amqplib';
import type { Logger } from 'pino';
import { isConvergeError } from '../core/errors.ts';
import type { AmqpConnection } from './amqpConnection.ts';
import { nodeQueueOf } from './brokerNames.ts';
import { createTokenBucket } from './tokenBucket.ts';
import { assertTopology, nodeTopology } from './topology.ts';
import type { InboxKind } from './topology.ts';

// Node inboxes declared at a bounded rate, each once per connection (docs/transport.md#node-inboxes).
// A broker asked for thousands of new queues at once spends itself on them and stops answering
// new AMQP handshakes (a restarted engine's included), so making an inbox waits for a token.
//
// An inbox that exists (made by `node enroll` ahead of need, or before a restart) costs nothing
// before its first publish: the publisher sends first, mandatory, and only a declaration the
// broker returns unroutable makes it declare the inbox (`declare`) and send again. Checking each
// inbox before its first publish took two round trips a node, two thirds of the relay's time for a
// fleet of enrolled nodes (docs/operations.md#sizing-the-broker). What the check also did — find
// an inbox in an earlier form, to warn — runs behind the publishes (`routed`), one inbox at a time
// on a channel of its own, at a bounded rate.
//
// Which inboxes are known is kept in memory, per connection: the broker is the authority on
// what exists (it may have been reset, or the engine moved to another cluster node), so a new
// connection starts with an empty set. A durable set would skip an inbox a reset broker lost.
//
// One declaration at a time per channel (a few channels side by side): an inbox that exists with other arguments
// (made by an earlier Converge) makes the broker refuse and close the channel it came on, which
// must not be a channel other work is in flight on. Such an inbox is still a working inbox: it is
// bound and used as it is, with a warning once per node (CONVERGE_ERR_INBOX_OUTDATED).

/** Declarations of new inboxes a second by default; see docs/operations.md#sizing-the-broker. */
export const defaultInboxDeclareRate = 100;
/** Channels declaring inboxes side by side. */
export const defaultInboxLanes = 4;
/** Form checks of inboxes found by a routed publish, a second at most (behind the publishes). */
export const defaultInboxCheckRate = 100;

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
  /** Form checks a second at most (default defaultInboxCheckRate). */
  checkRate?: number;
}>;

export type InboxDeclarer = Readonly<{
  /** The inbox is known on the live connection (declared, being declared, or published to): resolves once it is ready. Null when unknown. */
  known: (node: string) => Promise<void> | null;
  /** Declares `node`'s inbox and binds it (a token from the bucket), once per connection: the publisher found it missing. */
  declare: (node: string) => Promise<void>;
  /** A publish to `node` was routed: its inbox exists. Known from now on; its form is checked behind the publishes. */
  routed: (node: string) => void;
  /** The inbox went away (a publish came back unroutable): the next declare asserts it again. */
  forget: (node: string) => void;
  close: () => Promise<void>;
}>;

export function createInboxDeclarer(conn: AmqpConnection, options: InboxDeclarerOptions): InboxDeclarer {
  const { logger } = options;
  const rate = options.ratePerSecond ?? defaultInboxDeclareRate;
  const bucket = createTokenBucket({ ratePerSecond: rate, burst: options.burst ?? Math.max(1, Math.round(rate / 10)) });
  const checkRate = options.checkRate ?? defaultInboxCheckRate;
  const checkBucket = createTokenBucket({ ratePerSecond: checkRate, burst: Math.max(1, Math.round(checkRate / 10)) });
  const kind = options.inbox ?? 'classic';
  /** Known (declared, being declared, or published to) on connection `generation`. */
  let declared = new Map<string, Promise<void>>();
  let generation = conn.generation();
  /** Nodes already logged as having an outdated inbox (once per node per process). */
  const outdated = new Set<string>();
  /**
   * Declarations run one at a time per lane, each lane on a channel of its own, so a refusal
   * closes the channel under no one else's. The form checks have a lane of their own, so a
   * declaration never waits behind them.
   */
  type Lane = { declaring: Promise<Channel> | null; line: Promise<unknown> };
  const newLane = (): Lane => ({ declaring: null, line: Promise.resolve() });
  const lanes: Lane[] = Array.from({ length: options.lanes ?? defaultInboxLanes }, newLane);
  const checkLane = newLane();
  let nextLane = 0;
  /** Aborts the form checks still waiting when the declarer closes (or the connection does). */
  const stopping = new AbortController();
  const checksEnd = AbortSignal.any([conn.closed, stopping.signal]);

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

  const warnOutdated = (node: string, err: unknown): void => {
    if (outdated.has(node)) return;
    outdated.add(node);
    const name = nodeQueueOf(node);
    logger.warn(
      { code: 'CONVERGE_ERR_INBOX_OUTDATED', node, queue: name, err: (err as Error).message },
      `inbox ${name} exists with other arguments than this Converge declares (an earlier version's); declarations are published to it as it is. Run \`converge broker migrate-inboxes\` to bring the inboxes to the current form (docs/operations.md)`,
    );
  };

  const assertInbox = async (lane: Lane, node: string): Promise<void> => {
    const topology = nodeTopology(node, kind);
    try {
      await bucket.take(conn.closed);
      await assertTopology(await channel(lane), topology);
    } catch (err) {
      lane.declaring = null;
      if (!isConvergeError(err, 'CONVERGE_ERR_TOPOLOGY_CONFLICT')) throw err;
      // It exists in another form: make sure it is bound (as it was when it was made) and use it.
      const ch = await channel(lane);
      for (const b of topology.bindings) await ch.bindQueue(b.queue, b.exchange, b.routingKey);
      warnOutdated(node, err);
    }
  };

  /** Re-declares a routed inbox's queue alone (no binding, no token): the broker refuses one in another form. */
  const checkForm = async (node: string): Promise<void> => {
    await checkBucket.take(checksEnd);
    if (checksEnd.aborted) return;
    const queue = nodeTopology(node, kind).queues[0]!;
    try {
      await assertTopology(await channel(checkLane), { exchanges: [], queues: [queue], bindings: [] });
    } catch (err) {
      checkLane.declaring = null;
      if (isConvergeError(err, 'CONVERGE_ERR_TOPOLOGY_CONFLICT')) warnOutdated(node, err);
      // Anything else (the inbox deleted since, the connection lost) is the next publish's to find.
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

  const enqueue = (lane: Lane, run: () => Promise<void>): Promise<void> => {
    const next = lane.line.then(run, run);
    lane.line = next.catch(() => undefined);
    return next;
  };

  return {
    known: (node) => current().get(node) ?? null,
    declare: (node) => {
      const set = current();
      const lane = lanes[nextLane++ % lanes.length]!;
      const next = enqueue(lane, () => assertInbox(lane, node));
      set.set(node, next);
      // A failed declaration is not remembered: the relay's retry declares it again.
      next.catch(() => {
        if (set.get(node) === next) set.delete(node);
      });
      return next;
    },
    routed: (node) => {
      const set = current();
      if (set.has(node)) return;
      set.set(node, Promise.resolve());
      void enqueue(checkLane, () => checkForm(node)).catch(() => undefined);
    },
    forget: (node) => {
      current().delete(node);
    },
    close: async () => {
      stopping.abort();
      for (const lane of [...lanes, checkLane]) {
        const ch = lane.declaring;
        lane.declaring = null;
        await ch?.then((c) => c.close()).catch(() => undefined);
      }
    },
  };
}
