import { inboundKinds, names, nodeQueueOf } from '../transport/brokerNames.ts';
import { escapeRegex, validateNodeId } from '../core/wire/nodeId.ts';

// What a node's broker account may do, derived from wire.go: "Its broker account is scoped to this
// exchange and its own queue, so it can say these things and nothing else." (docs/design.md §1)

export type VhostPermissions = Readonly<{ configure: string; write: string; read: string }>;
export type TopicPermissions = Readonly<{ exchange: string; write: string; read: string }>;

/** Routing keys a node may publish (wire.go KeyReport, KeyAlive). */
export const nodeRoutingKeys = inboundKinds;
const meshExchange = names.meshExchange;

export function nodePermissions(id: string): Readonly<{ vhost: VhostPermissions; topic: TopicPermissions }> {
  validateNodeId(id);
  return {
    vhost: {
      // Nothing: the engine declares every exchange and queue, a node only uses them. `^$` matches
      // only the empty name, which no resource can be configured under (a server-named queue is
      // checked against its generated `amq.gen-…` name).
      configure: '^$',
      // Only `mesh`. Anchored, so neither the default exchange (`""`, checked as `amq.default`)
      // nor `mesh.declarations` nor `mesh.dead` matches.
      write: `^${escapeRegex(meshExchange)}$`,
      // Only its own inbox.
      read: `^${escapeRegex(nodeQueueOf(id))}$`,
    },
    topic: {
      exchange: meshExchange,
      write: `^(${nodeRoutingKeys.join('|')})$`,
      // A node never binds to `mesh`; `^$` admits no routing key it could use.
      read: '^$',
    },
  };
}
