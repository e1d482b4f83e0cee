import { ConvergeError } from '../errors.ts';
import { createEsdbEventStore } from './esdbEventStore.ts';
import type { EsdbEventStoreOptions } from './esdbEventStore.ts';
import { createMemoryEventStore } from './memoryEventStore.ts';
import type { MemoryEventStoreOptions } from './memoryEventStore.ts';
import { createPostgresEventStore } from './postgres/index.ts';
import type { PostgresEventStoreOptions } from './postgres/index.ts';
import type { EventStore } from './port.ts';
import { createSqliteEventStore } from './sqliteEventStore.ts';
import type { SqliteEventStoreOptions } from './sqliteEventStore.ts';

// The event store (DESIGN §5): one port, four adapters, one factory.
export type * from './port.ts';
export { createMemoryEventStore, createSqliteEventStore, createEsdbEventStore, createPostgresEventStore };
export type { MemoryEventStoreOptions, SqliteEventStoreOptions, EsdbEventStoreOptions, PostgresEventStoreOptions };
export { sqliteSchemaVersion } from './sqliteEventStore.ts';
export { postgresSchemaVersion } from './postgres/index.ts';
export { defaultMaxEventBytes } from './appendRules.ts';

export type OpenEventStoreOptions = Readonly<{
  /** Applies to every adapter. */
  maxEventBytes?: number;
  sqlite?: SqliteEventStoreOptions;
  esdb?: EsdbEventStoreOptions;
  postgres?: PostgresEventStoreOptions;
}>;

/**
 * `memory:` · `sqlite:<path>` (relative or absolute; `sqlite::memory:` for a throwaway database) ·
 * `esdb://…` / `esdb+discover://…` (an EventStoreDB connection string, passed through as is) ·
 * `postgres://…` / `postgresql://…` (a libpq-style URL; `?schema=name` picks the schema, default `converge`).
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
  if (url.startsWith('postgres://') || url.startsWith('postgresql://'))
    return createPostgresEventStore(url, { ...options.postgres, ...limit });
  throw new ConvergeError(
    'CONVERGE_ERR_CONFIG_INVALID',
    `store url ${JSON.stringify(url)} is not memory:, sqlite:<path>, postgres://…, esdb://… or esdb+discover://…`,
  );
}
