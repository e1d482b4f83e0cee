import { ConvergeError } from '../errors.ts';
import { createEsdbEventStore } from './esdbEventStore.ts';
import type { EsdbEventStoreOptions } from './esdbEventStore.ts';
import { createMemoryEventStore } from './memoryEventStore.ts';
import type { MemoryEventStoreOptions } from './memoryEventStore.ts';
import type { EventStore } from './port.ts';
import { createSqliteEventStore } from './sqliteEventStore.ts';
import type { SqliteEventStoreOptions } from './sqliteEventStore.ts';

// The event store (DESIGN §5): one port, three adapters, one factory.
export type * from './port.ts';
export { createMemoryEventStore, createSqliteEventStore, createEsdbEventStore };
export type { MemoryEventStoreOptions, SqliteEventStoreOptions, EsdbEventStoreOptions };
export { sqliteSchemaVersion } from './sqliteEventStore.ts';
export { defaultMaxEventBytes } from './appendRules.ts';

export type OpenEventStoreOptions = Readonly<{
  /** Applies to every adapter. */
  maxEventBytes?: number;
  sqlite?: SqliteEventStoreOptions;
  esdb?: EsdbEventStoreOptions;
}>;

/**
 * `memory:` · `sqlite:<path>` (relative or absolute; `sqlite::memory:` for a throwaway database) ·
 * `esdb://…` / `esdb+discover://…` (an EventStoreDB connection string, passed through as is).
 */
export function openEventStore(url: string, options: OpenEventStoreOptions = {}): EventStore {
  const limit = options.maxEventBytes === undefined ? {} : { maxEventBytes: options.maxEventBytes };
  if (url === 'memory:' || url === 'memory') return createMemoryEventStore(limit);
  if (url.startsWith('sqlite:')) {
    const path = url.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '');
    if (path === '')
      throw new ConvergeError('CONVERGE_ERR_CONFIG_INVALID', `store url ${JSON.stringify(url)} names no file: use sqlite:<path>`);
    return createSqliteEventStore(path, { ...options.sqlite, ...limit });
  }
  if (url.startsWith('esdb://') || url.startsWith('esdb+discover://')) return createEsdbEventStore(url, { ...options.esdb, ...limit });
  throw new ConvergeError(
    'CONVERGE_ERR_CONFIG_INVALID',
    `store url ${JSON.stringify(url)} is not memory:, sqlite:<path>, esdb://… or esdb+discover://…`,
  );
}
