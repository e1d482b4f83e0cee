import type { Channel } from 'amqplib';
import { ConvergeError } from '../errors.ts';
import { names, nodeQueueOf } from './brokerNames.ts';

// DESIGN §1 broker topology as data, and one thin function that asserts it on a channel.
// Names and arguments are a contract with the Go nodes: change them only with the node side.

export type ExchangeSpec = Readonly<{ name: string; type: 'topic' | 'direct' | 'fanout'; durable: true }>;
export type QueueSpec = Readonly<{ name: string; durable: true; arguments: Readonly<Record<string, string | number | boolean>> }>;
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
      // Classic on purpose: operators read it by hand, and a quorum queue's dead-letter loop
      // protection is not needed for a queue nothing consumes automatically.
      { name: names.deadQueue, durable: true, arguments: {} },
      {
        name: names.reportsQueue,
        durable: true,
        arguments: {
          'x-queue-type': 'quorum',
          // DESIGN §6: engine instances are active/passive; one consumer owns report order.
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

/** A node's inbox: declared by the engine the first time it sends to the node (DESIGN §1). */
export function nodeTopology(node: string): Topology {
  const queue = nodeQueueOf(node);
  return {
    exchanges: [],
    queues: [{ name: queue, durable: true, arguments: { 'x-queue-type': 'quorum' } }],
    bindings: [{ queue, exchange: names.declarationsExchange, routingKey: node }],
  };
}

const isPreconditionFailed = (e: unknown): boolean => typeof e === 'object' && e !== null && (e as { code?: unknown }).code === 406;

/**
 * Assert a topology. Idempotent; an existing queue or exchange declared with other arguments
 * makes the broker answer 406 and close the channel, which becomes a startup error naming it.
 * The channel is unusable after a conflict, so callers pass one they can throw away.
 */
export async function assertTopology(channel: Channel, topology: Topology): Promise<void> {
  const conflict = (kind: string, name: string, cause: unknown): ConvergeError =>
    new ConvergeError(
      'CONVERGE_ERR_TOPOLOGY_CONFLICT',
      `${kind} ${JSON.stringify(name)} already exists on the broker with different arguments (${(cause as Error).message}); delete it or fix its declaration (DESIGN §1)`,
      { cause, details: { kind, name } },
    );
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
