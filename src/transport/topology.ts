import type { Channel } from 'amqplib';
import { ConvergeError } from '../core/errors.ts';
import { names, nodeQueueOf } from './brokerNames.ts';

// docs/design.md §1 broker topology as data, and one thin function that asserts it on a channel.
// Names and arguments are a contract with the Go nodes: change them only with the node side.

export type ExchangeSpec = Readonly<{ name: string; type: 'topic' | 'direct' | 'fanout'; durable: true }>;
export type QueueArguments = Readonly<Record<string, string | number | boolean>>;
export type QueueSpec = Readonly<{
  name: string;
  durable: true;
  arguments: QueueArguments;
  /**
   * Arguments an earlier Converge declared this queue with, still accepted where the queue already
   * exists that way (re-declaring a queue with other arguments is refused by the broker), with
   * what the operator should do about it.
   */
  legacy?: readonly Readonly<{ arguments: QueueArguments; advice: string }>[];
}>;
export type BindingSpec = Readonly<{ queue: string; exchange: string; routingKey: string }>;
export type Topology = Readonly<{ exchanges: readonly ExchangeSpec[]; queues: readonly QueueSpec[]; bindings: readonly BindingSpec[] }>;

/**
 * Explicit so a poison message cannot loop forever, and high enough that connection drops
 * (which a 3.x quorum queue also counts as returns) do not dead-letter a good report.
 */
export const defaultDeliveryLimit = 50;

export type MeshTopologyOptions = Readonly<{ deliveryLimit?: number }>;

export function meshTopology(options: MeshTopologyOptions = {}): Topology {
  const deadLetter = { 'x-dead-letter-exchange': names.deadExchange };
  return {
    exchanges: [
      { name: names.meshExchange, type: 'topic', durable: true },
      { name: names.declarationsExchange, type: 'direct', durable: true },
      { name: names.deadExchange, type: 'fanout', durable: true },
    ],
    queues: [
      // Quorum like the others: a classic queue lives on one node of a cluster, so
      // while that node is down its dead letters cannot be read or added, and the engine cannot
      // re-declare it on the node it fails over to. Operators still read it by hand (basic.get).
      {
        name: names.deadQueue,
        durable: true,
        arguments: { 'x-queue-type': 'quorum' },
        legacy: [
          {
            arguments: {},
            advice:
              'it is a classic queue (made by an earlier Converge): on a cluster it is unavailable while its node is down; once its dead letters are read, delete it and restart the engine to re-create it as a quorum queue',
          },
        ],
      },
      {
        name: names.reportsQueue,
        durable: true,
        arguments: {
          'x-queue-type': 'quorum',
          // docs/design.md §6: engine instances are active/passive; one consumer owns report order.
          'x-single-active-consumer': true,
          'x-delivery-limit': options.deliveryLimit ?? defaultDeliveryLimit,
          ...deadLetter,
        },
      },
      { name: names.aliveQueue, durable: true, arguments: { 'x-queue-type': 'quorum', ...deadLetter } },
    ],
    bindings: [
      { queue: names.deadQueue, exchange: names.deadExchange, routingKey: '' },
      { queue: names.reportsQueue, exchange: names.meshExchange, routingKey: names.reportKey },
      { queue: names.aliveQueue, exchange: names.meshExchange, routingKey: names.aliveKey },
    ],
  };
}

/**
 * A node's inbox: only the latest declaration matters to a node and the store is the
 * outbox, so the inbox keeps one message — a newer declaration drops the older one still waiting.
 * `classic` (the default, `--inbox-queue`): a classic v2 queue, one queue process and no Raft
 * group, on one broker node: measured, the broker grew by 11–41 KiB per empty inbox against
 * 114–122 KiB for a quorum inbox, which also has a member on every node of a cluster. But on a
 * cluster the classic inboxes of a node that is down are unavailable until it is back, and one
 * holding a message keeps two files open. `quorum`: the same bound on a quorum queue, which keeps
 * working on the surviving majority of a cluster. Figures: `bench/inboxes.ts`
 * and docs/transport.md. The Go node consumes `node.<id>` by name only, so the type and arguments
 * are the engine's choice (docs/design.md §1); an inbox declared otherwise is migrated by
 * `converge broker migrate-inboxes`.
 */
export type InboxKind = 'classic' | 'quorum';
export const inboxKinds: readonly InboxKind[] = ['classic', 'quorum'];

const oneMessage = { 'x-max-length': 1, 'x-overflow': 'drop-head' } as const;
export const inboxArgumentsOf: Readonly<Record<InboxKind, QueueArguments>> = Object.freeze({
  classic: Object.freeze({ 'x-queue-type': 'classic', 'x-queue-version': 2, ...oneMessage }),
  quorum: Object.freeze({ 'x-queue-type': 'quorum', ...oneMessage }),
});
/** The default inbox's arguments. */
export const inboxArguments: QueueArguments = inboxArgumentsOf.classic;

/** A node's inbox: declared by the engine the first time it sends to the node (docs/design.md §1). */
export function nodeTopology(node: string, kind: InboxKind = 'classic'): Topology {
  const queue = nodeQueueOf(node);
  return {
    exchanges: [],
    queues: [{ name: queue, durable: true, arguments: inboxArgumentsOf[kind] }],
    bindings: [{ queue, exchange: names.declarationsExchange, routingKey: node }],
  };
}

const isPreconditionFailed = (e: unknown): boolean => typeof e === 'object' && e !== null && (e as { code?: unknown }).code === 406;
export const isNotFound = (e: unknown): boolean => typeof e === 'object' && e !== null && (e as { code?: unknown }).code === 404;

const conflict = (kind: string, name: string, cause: unknown): ConvergeError =>
  new ConvergeError(
    'CONVERGE_ERR_TOPOLOGY_CONFLICT',
    `${kind} ${JSON.stringify(name)} already exists on the broker with different arguments (${(cause as Error).message}); ${
      kind === 'queue' && name.startsWith(nodeQueueOf(''))
        ? 'a node inbox made by an earlier Converge: `converge broker migrate-inboxes` brings the inboxes to the current form'
        : 'delete it or fix its declaration'
    } (docs/design.md §1)`,
    { cause, details: { kind, name } },
  );

/**
 * Assert a topology. Idempotent; an existing queue or exchange declared with other arguments
 * makes the broker answer 406 and close the channel, which becomes a startup error naming it.
 * The channel is unusable after a conflict, so callers pass one they can throw away.
 */
export async function assertTopology(channel: Channel, topology: Topology): Promise<void> {
  for (const x of topology.exchanges) {
    try {
      await channel.assertExchange(x.name, x.type, { durable: x.durable });
    } catch (e) {
      throw isPreconditionFailed(e) ? conflict('exchange', x.name, e) : e;
    }
  }
  for (const q of topology.queues) {
    try {
      await channel.assertQueue(q.name, { durable: q.durable, arguments: { ...q.arguments } });
    } catch (e) {
      throw isPreconditionFailed(e) ? conflict('queue', q.name, e) : e;
    }
  }
  for (const b of topology.bindings) await channel.bindQueue(b.queue, b.exchange, b.routingKey);
}

/** What declaring a topology found besides success: queues in an older, accepted form, and queues whose node is down. */
export type TopologyFindings = Readonly<{
  legacy: readonly Readonly<{ queue: string; advice: string }>[];
  /** Classic queues whose home node is down (404 on declare, RabbitMQ cluster): skipped, with their bindings. */
  unavailable: readonly Readonly<{ queue: string; reason: string }>[];
}>;

/**
 * Declare a topology on channels from `open` (a refused declaration closes its channel, so the
 * next one is tried on a fresh channel): a queue that exists in one of its `legacy` forms is
 * accepted and reported, a classic queue whose cluster node is down is skipped and reported (the
 * engine must fail over to the other nodes rather than wait for that one), and any other
 * difference is CONVERGE_ERR_TOPOLOGY_CONFLICT.
 */
export async function declareTopology(open: () => Promise<Channel>, topology: Topology): Promise<TopologyFindings> {
  const legacy: { queue: string; advice: string }[] = [];
  const unavailable: { queue: string; reason: string }[] = [];
  // A refusal arrives both as the rejected call and as the channel's 'error' event; the call is
  // where it is handled, and an unheard 'error' event would crash the process.
  const opened = async (): Promise<Channel> => (await open()).on('error', () => undefined);
  let ch = await opened();
  const fresh = async (): Promise<Channel> => {
    ch.close().catch(() => undefined);
    return (ch = await opened());
  };
  try {
    for (const x of topology.exchanges) {
      try {
        await ch.assertExchange(x.name, x.type, { durable: x.durable });
      } catch (e) {
        throw isPreconditionFailed(e) ? conflict('exchange', x.name, e) : e;
      }
    }
    for (const q of topology.queues) {
      const forms = [{ arguments: q.arguments, advice: null }, ...(q.legacy ?? [])];
      let firstRefusal: unknown = null;
      for (const form of forms) {
        try {
          await ch.assertQueue(q.name, { durable: q.durable, arguments: { ...form.arguments } });
          if (form.advice !== null) legacy.push({ queue: q.name, advice: form.advice });
          firstRefusal = null;
          break;
        } catch (e) {
          await fresh();
          if (isNotFound(e)) {
            unavailable.push({ queue: q.name, reason: (e as Error).message });
            firstRefusal = null;
            break;
          }
          if (!isPreconditionFailed(e)) throw e;
          firstRefusal ??= e;
        }
      }
      if (firstRefusal !== null) throw conflict('queue', q.name, firstRefusal);
    }
    const skipped = new Set(unavailable.map((u) => u.queue));
    for (const b of topology.bindings) if (!skipped.has(b.queue)) await ch.bindQueue(b.queue, b.exchange, b.routingKey);
  } finally {
    ch.close().catch(() => undefined);
  }
  return { legacy, unavailable };
}
