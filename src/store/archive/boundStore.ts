import type { EventStore } from '../port.ts';

/** The store's methods, bound to it, so a view over it (merged with the archive, or refusing archived reads) can hand them on as its own. */
export function boundStore(store: EventStore): EventStore {
  const out: Record<string, unknown> = { kind: store.kind };
  for (const key of Object.keys(store) as (keyof EventStore)[]) {
    const v = store[key];
    out[key] = typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(store) : v;
  }
  return out as unknown as EventStore;
}
