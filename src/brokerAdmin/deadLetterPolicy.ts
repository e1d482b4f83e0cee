import { escapeRegex } from '../core/wire/nodeId.ts';
import { names } from '../transport/brokerNames.ts';
import { adminError, createManagementClient, seg } from './managementClient.ts';

// mesh.dead bounded, without touching its declaration: docs/design.md §1 declares it
// with no arguments, a queue's arguments are part of its identity (a broker holding mesh.dead
// declared otherwise makes the engine's start fail with CONVERGE_ERR_TOPOLOGY_CONFLICT), and
// every deployment has one already. So the bound is a broker policy, which applies to a queue
// as it is, and to the existing one the moment it is set.
//
// An *operator* policy rather than a user one: a queue takes one user policy (the highest
// priority wins whole), so ours would silently replace one an operator already has on
// mesh.dead; operator policies combine with user policies, the stricter limit winning. They
// cannot set `overflow` (RabbitMQ 3.10), whose default, drop-head, is the one wanted: the newest
// refusals are the ones to read, and reject-publish would make a dead-letter copy fail and its
// original stay unacked, holding ingest's prefetch.

export const deadLetterPolicyName = 'converge-mesh-dead';

export type DeadLetterBound = Readonly<{
  managementUrl: string;
  vhost: string;
  /** Most messages kept; the oldest beyond it are dropped. */
  maxLength: number;
  /** Most body bytes kept, likewise. */
  maxBytes: number;
}>;

/** Set (or update) the operator policy bounding mesh.dead in `vhost`. Throws CONVERGE_ERR_BROKER_ADMIN. */
export async function boundDeadLetterQueue(bound: DeadLetterBound): Promise<void> {
  const client = createManagementClient({ managementUrl: bound.managementUrl });
  const path = `/operator-policies/${seg(bound.vhost)}/${seg(deadLetterPolicyName)}`;
  const res = await client.request('PUT', path, {
    pattern: `^${escapeRegex(names.deadQueue)}$`,
    'apply-to': 'queues',
    priority: 0,
    definition: { 'max-length': bound.maxLength, 'max-length-bytes': bound.maxBytes },
  });
  if (res.status !== 201 && res.status !== 204) throw adminError('PUT', path, res);
}

/**
 * The vhost an AMQP URL names (its path, percent-decoded; none is `/`). A cluster's URLs separated
 * by commas (as `--amqp` takes them) name one vhost: the first URL's.
 */
export function vhostOfAmqpUrl(url: string): string {
  const path = new URL(url.split(',')[0]!.trim()).pathname.replace(/^\//, '');
  return path === '' ? '/' : decodeURIComponent(path);
}
