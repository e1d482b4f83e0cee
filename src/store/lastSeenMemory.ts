import type { LastSeenLease } from './port.ts';

// The last-seen lease held in this process only (EventStore.saveLastSeen/loadLastSeen): the
// memory store's, and EventStoreDB's, which has no table to overwrite in place. On EventStoreDB
// the lease does not outlive the process, so after a crash the record marks the whole span since
// that engine's start as not observed (docs/design.md §3 "Liveness as recorded").

export type LastSeenMemory = Readonly<{
  save: (engine: string, flushedAt: number, nodes: readonly (readonly [string, number])[]) => void;
  load: () => LastSeenLease;
}>;

export function createLastSeenMemory(): LastSeenMemory {
  const nodes = new Map<string, number>();
  const flushes = new Map<string, number>();
  return {
    save(engine, flushedAt, rows) {
      for (const [node, ms] of rows) if (!(ms <= (nodes.get(node) ?? -Infinity))) nodes.set(node, ms);
      flushes.set(engine, flushedAt);
    },
    load: () => ({ nodes: new Map(nodes), flushes: new Map(flushes) }),
  };
}
