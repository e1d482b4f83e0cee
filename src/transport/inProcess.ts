import type { ErrorCode } from '../core/errors.ts';
import { createTurnBudget } from '../turnBudget.ts';
import { defaultPrefetch } from './amqpIngestSource.ts';
import { inboundKinds, nodeQueueOf, queueOfKind } from './brokerNames.ts';
import type { DeclarationPublisher, Delivery, InboundKind, IngestSource, NodeLink, OutboundDeclaration } from './port.ts';

// The transport without a broker: the same ports as the AMQP side (port.ts), backed by arrays
// in this process. For `converge demo` without a RabbitMQ URL and for unit tests. It keeps the
// properties ingest relies on — a delivery stays unacked until acked, unacked deliveries are
// redelivered (flagged) when the consumer stops, in their order and ahead of the rest, a consumer
// holds at most `prefetch` unacked deliveries per queue, a node inbox holds messages until consumed —
// and none of the ones it does not (durability, user_id validation: a link's userId is
// whatever the caller says).

type Message = { body: Buffer; messageId: string | null; userId: string | null; routingKey: string; redelivered: boolean };
type Handle = Readonly<{ seq: number; generation: number }>;

export type DeadLetter = Readonly<{
  kind: InboundKind;
  body: Buffer;
  messageId: string | null;
  userId: string | null;
  code: ErrorCode;
  reason: string;
}>;

export type InProcessBroker = Readonly<{
  /** The engine's consumer of reports and alive (one at a time, like single-active-consumer). */
  ingestSource: () => IngestSource;
  declarationPublisher: () => DeclarationPublisher;
  /** A node's side. `userId` defaults to the node id (what RabbitMQ would validate); null sends none. */
  nodeLink: (node: string, options?: Readonly<{ userId?: string | null }>) => NodeLink;
  /** Put any message on mesh (tests of hostile input): routing key 'report' or 'alive'. */
  inject: (
    key: InboundKind,
    body: Buffer,
    props?: Readonly<{ messageId?: string | null; userId?: string | null; routingKey?: string }>,
  ) => void;
  deadLetters: () => readonly DeadLetter[];
  /** Messages waiting or unacked, per queue name (mesh.reports, mesh.alive, node.<id>). */
  depth: () => Readonly<Record<string, number>>;
}>;

type Inbox = { messages: Buffer[]; consumer: ((body: Buffer) => Promise<void>) | null; busy: boolean };

export type InProcessBrokerOptions = Readonly<{
  /** Unacked deliveries per queue (mesh.reports, mesh.alive), as the AMQP consumer's basic.qos. */
  prefetch?: number;
  /** Time a turn spends delivering (ms; src/turnBudget.ts), at least one delivery a turn. */
  sliceMs?: number;
}>;

export function createInProcessBroker(options: InProcessBrokerOptions = {}): InProcessBroker {
  const prefetch = options.prefetch ?? defaultPrefetch;
  const queues: Record<InboundKind, Message[]> = { report: [], alive: [] };
  const unacked = new Map<number, { kind: InboundKind; message: Message }>();
  const out: Record<InboundKind, number> = { report: 0, alive: 0 };
  const dead: DeadLetter[] = [];
  const inboxes = new Map<string, Inbox>();
  let consumer: ((d: Delivery) => void) | null = null;
  let paused = false;
  let generation = 0;
  let seq = 0;
  let scheduled = false;
  /** Deliveries taken off a queue between two looks at the clock. */
  const deliverChunk = 16;
  /** The queue a turn's deliveries begin with: they take turns, so neither waits behind a backlog of the other. */
  let first = 0;

  /**
   * Deliver what the window allows, for at most a slice of the turn: the consumer parses each
   * delivery as it comes, and a window of 2,000 reports handed over in one turn held the loop
   * (and every API request) for tens of ms. What is left goes in the next turn, as a socket
   * hands a consumer what one read brought.
   */
  function deliver(deliverTo: (d: Delivery) => void): void {
    const budget = createTurnBudget(options.sliceMs === undefined ? {} : { sliceMs: options.sliceMs });
    const kinds = [...inboundKinds.slice(first), ...inboundKinds.slice(0, first)];
    first = (first + 1) % inboundKinds.length;
    let delivered = false;
    for (const kind of kinds) {
      // At least one chunk a turn, whatever the slice: the window always moves.
      while ((!delivered || !budget.spent()) && !paused) {
        const chunk = queues[kind].splice(0, Math.min(deliverChunk, Math.max(0, prefetch - out[kind])));
        if (chunk.length === 0) break;
        delivered = true;
        for (const message of chunk) {
          const handle: Handle = { seq: ++seq, generation };
          unacked.set(handle.seq, { kind, message });
          out[kind]++;
          deliverTo({ kind, ...message, handle });
        }
      }
    }
    if (inboundKinds.some((k) => queues[k].length > 0 && out[k] < prefetch)) pump();
  }

  function pump(): void {
    if (scheduled) return;
    scheduled = true;
    // Deliver on a later tick, as a socket would: callers never see re-entrant deliveries.
    setImmediate(() => {
      scheduled = false;
      if (consumer === null || paused) return;
      deliver(consumer);
    });
  }

  function enqueue(kind: InboundKind, message: Message): void {
    queues[kind].push(message);
    pump();
  }

  function inbox(node: string): Inbox {
    let box = inboxes.get(node);
    if (box === undefined) inboxes.set(node, (box = { messages: [], consumer: null, busy: false }));
    return box;
  }

  function feed(box: Inbox): void {
    if (box.busy || box.consumer === null) return;
    const next = box.messages[0];
    if (next === undefined) return;
    box.busy = true;
    const handler = box.consumer;
    setImmediate(() => {
      handler(next)
        .then(() => box.messages.shift())
        .catch(() => undefined) // a failed handler leaves the message for the next attempt
        .finally(() => {
          box.busy = false;
          feed(box);
        });
    });
  }

  const live = (d: Delivery): boolean => (d.handle as Handle).generation === generation && unacked.has((d.handle as Handle).seq);
  /** A delivery acked, nacked or dead-lettered: its place in the window goes to the next message. */
  const settle = (d: Delivery): void => {
    const seqOf = (d.handle as Handle).seq;
    const u = unacked.get(seqOf);
    if (u === undefined) return;
    unacked.delete(seqOf);
    out[u.kind]--;
    if (queues[u.kind].length > 0) pump();
  };

  return {
    ingestSource: () => {
      const source: IngestSource = {
        async start(onDelivery, onLink) {
          generation++;
          consumer = onDelivery;
          paused = false;
          // Consuming at once (deliveries come on a later tick): there is no link to lose.
          onLink?.('consuming');
          pump();
        },
        ack(deliveries) {
          for (const d of deliveries) if (live(d)) settle(d);
        },
        isLive: live,
        async deadLetter(d, code, reason) {
          if (!live(d)) return;
          dead.push({ kind: d.kind, body: d.body, messageId: d.messageId, userId: d.userId, code, reason });
          settle(d);
        },
        reject(d, code) {
          if (!live(d)) return;
          // The queue's own dead-lettering: the body and sender as sent, no reason text.
          dead.push({ kind: d.kind, body: d.body, messageId: d.messageId, userId: d.userId, code, reason: '' });
          settle(d);
        },
        async pause() {
          paused = true;
        },
        async stop() {
          consumer = null;
          generation++;
          // Like a closed channel: whatever was not acked goes back, flagged redelivered, ahead of
          // what was never delivered and in the order it was delivered.
          for (const kind of inboundKinds) {
            const back = [...unacked.values()].filter((u) => u.kind === kind).map((u) => ({ ...u.message, redelivered: true }));
            queues[kind].unshift(...back);
            out[kind] = 0;
          }
          unacked.clear();
        },
      };
      return source;
    },

    declarationPublisher: () => ({
      async publish(d: OutboundDeclaration) {
        if (d.fence !== undefined && !d.fence())
          throw new Error(`declaration ${d.digest} not published: the relay lease is past its bound`);
        const box = inbox(d.node);
        box.messages.push(d.body);
        feed(box);
      },
      async close() {},
    }),

    nodeLink: (node, options = {}) => {
      const userId = options.userId === undefined ? node : options.userId;
      return {
        node,
        async consume(onMessage) {
          const box = inbox(node);
          box.consumer = onMessage;
          feed(box);
        },
        async publish(key, body, messageId) {
          enqueue(key, { body, messageId, userId, routingKey: key, redelivered: false });
        },
        async close() {
          const box = inboxes.get(node);
          if (box !== undefined) box.consumer = null;
        },
      };
    },

    inject: (key, body, props = {}) =>
      enqueue(key, {
        body,
        messageId: props.messageId ?? null,
        userId: props.userId ?? null,
        routingKey: props.routingKey ?? key,
        redelivered: false,
      }),

    deadLetters: () => dead,

    depth: () => {
      const out: Record<string, number> = { [queueOfKind.report]: queues.report.length, [queueOfKind.alive]: queues.alive.length };
      for (const { kind } of unacked.values()) out[queueOfKind[kind]]! += 1;
      for (const [node, box] of inboxes) out[nodeQueueOf(node)] = box.messages.length;
      return out;
    },
  };
}
