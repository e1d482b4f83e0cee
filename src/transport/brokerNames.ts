// The docs/design.md §1 broker names, in one place: exchanges, queues and routing keys are a contract
// with the Go nodes (wire.go), so everything that names them — the topology the engine asserts,
// the ingest and relay, the in-process broker, a node's account permissions — reads them here.
// Plain data with no imports, so a module that only needs a name loads no broker client.

export const names = Object.freeze({
  /** Topic exchange nodes publish reports and alive to. */
  meshExchange: 'mesh',
  /** Direct exchange the engine publishes declarations to, routing key = node id. */
  declarationsExchange: 'mesh.declarations',
  deadExchange: 'mesh.dead',
  deadQueue: 'mesh.dead',
  reportsQueue: 'mesh.reports',
  aliveQueue: 'mesh.alive',
  /** wire.go KeyReport. */
  reportKey: 'report',
  /** wire.go KeyAlive. */
  aliveKey: 'alive',
});

/** What a node says on `mesh`, named by its routing key (wire.go KeyReport, KeyAlive). */
export const inboundKinds = [names.reportKey, names.aliveKey] as const;
export type InboundKind = (typeof inboundKinds)[number];

/** The queue each inbound kind lands in. */
export const queueOfKind: Readonly<Record<InboundKind, string>> = Object.freeze({
  report: names.reportsQueue,
  alive: names.aliveQueue,
});

/** A node's inbox, bound to `mesh.declarations` with the node id. */
export const nodeQueueOf = (node: string): string => `node.${node}`;
