import type { LastSeenRow, LastSeenTable } from './port.ts';

// The last-seen table of the memory store (port.ts LastSeenTable): gone with the process, as the
// store's events are.
export function createMemoryLastSeen(): LastSeenTable {
  const rows = new Map<string, LastSeenRow>();
  let flushedAt: number | null = null;
  return {
    load: async () => ({ rows: [...rows.values()], flushedAt }),
    async save(changed, at) {
      for (const r of changed) rows.set(r.node, r);
      flushedAt = at;
    },
  };
}
