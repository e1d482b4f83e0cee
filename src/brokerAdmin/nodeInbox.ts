import { adminError, seg } from './managementClient.ts';
import type { ManagementClient } from './managementClient.ts';
import { names } from '../transport/brokerNames.ts';
import { nodeTopology } from '../transport/topology.ts';
import type { InboxKind } from '../transport/topology.ts';

// A node's inbox declared when the node is enrolled, through the management API, so an enrolled
// node has its inbox before the engine's first send to it (docs/design.md §1: the inbox is the engine's
// to declare) and a bulk send to an enrolled fleet declares nothing new on the broker.

export type InboxOutcome = Readonly<{
  queue: string;
  /** `declared`: it exists now in the form given (made, or already so); `other-form`: it exists with other arguments and was left as it is. */
  outcome: 'declared' | 'other-form';
  detail?: string;
}>;

/** Declare `mesh.declarations` (as the engine does), `node.<id>` in `kind`'s form, and its binding. Idempotent. */
export async function declareNodeInbox(client: ManagementClient, vhost: string, node: string, kind: InboxKind): Promise<InboxOutcome> {
  const v = seg(vhost);
  const exchangePath = `/exchanges/${v}/${seg(names.declarationsExchange)}`;
  const x = await client.request('PUT', exchangePath, {
    type: 'direct',
    durable: true,
    auto_delete: false,
    internal: false,
    arguments: {},
  });
  if (x.status !== 201 && x.status !== 204) throw adminError('PUT', exchangePath, x);
  const topology = nodeTopology(node, kind);
  const queue = topology.queues[0]!;
  const queuePath = `/queues/${v}/${seg(queue.name)}`;
  const q = await client.request('PUT', queuePath, { durable: true, auto_delete: false, arguments: { ...queue.arguments } });
  let outcome: InboxOutcome = { queue: queue.name, outcome: 'declared' };
  if (q.status === 400 && /inequivalent/i.test(JSON.stringify(q.body))) {
    // An inbox an earlier Converge made: the relay uses it as it is; migrate-inboxes brings it to the current form.
    outcome = { queue: queue.name, outcome: 'other-form', detail: String((q.body as { reason?: unknown } | null)?.reason ?? '') };
  } else if (q.status !== 201 && q.status !== 204) throw adminError('PUT', queuePath, q);
  for (const b of topology.bindings) {
    const path = `/bindings/${v}/e/${seg(b.exchange)}/q/${seg(b.queue)}`;
    const r = await client.request('POST', path, { routing_key: b.routingKey, arguments: {} });
    if (r.status !== 201 && r.status !== 204) throw adminError('POST', path, r);
  }
  return outcome;
}
