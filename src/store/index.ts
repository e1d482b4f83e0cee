import { ConvergeError } from '../core/errors.ts';
import type { EsdbEventStoreOptions } from './esdb/esdbEventStore.ts';
import type { PostgresEventStoreOptions } from './postgres/index.ts';
import type { EventStore } from './port.ts';
import type { SqliteEventStoreOptions } from './sqlite/sqliteEventStore.ts';

// The event store (docs/design.md#5-the-store-port): one port, four adapters, one factory. The
// factory imports an adapter only when its URL scheme is asked for: the EventStoreDB client alone
// takes a noticeable part of start-up, and a `converge status` on SQLite has no use for it, nor
// for pg. Code that wants one adapter imports it from its own file (memoryEventStore.ts,
// sqlite/sqliteEventStore.ts, esdb/esdbEventStore.ts, postgres/index.ts).
export type * from './port.ts';
export type { MemoryEventStoreOptions } from './memoryEventStore.ts';
export type { SqliteEventStoreOptions, EsdbEventStoreOptions, PostgresEventStoreOptions };
export { defaultMaxEventBytes } from './appendRules.ts';
export { readNodeColumns, columnsFromReadAll, columnsOf, createNodeColumns, eventKind, streamNodeOf } from './nodeColumns.ts';

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
export async function openEventStore(url: string, options: OpenEventStoreOptions = {}): Promise<EventStore> {
  const limit = options.maxEventBytes === undefined ? {} : { maxEventBytes: options.maxEventBytes };
  if (url === 'memory:' || url === 'memory') {
    const { createMemoryEventStore } = await import('./memoryEventStore.ts');
    return createMemoryEventStore(limit);
  }
  if (url.startsWith('sqlite:')) {
    const path = url.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '');
    if (path === '')
      throw new ConvergeError('CONVERGE_ERR_CONFIG_INVALID', `store url ${JSON.stringify(url)} names no file: use sqlite:<path>`);
    const { createSqliteEventStore } = await import('./sqlite/sqliteEventStore.ts');
    return createSqliteEventStore(path, { ...options.sqlite, ...limit });
  }
  if (url.startsWith('esdb://') || url.startsWith('esdb+discover://')) {
    const { createEsdbEventStore } = await import('./esdb/esdbEventStore.ts');
    return createEsdbEventStore(url, { ...options.esdb, ...limit });
  }
  if (url.startsWith('postgres://') || url.startsWith('postgresql://')) {
    const { createPostgresEventStore } = await import('./postgres/index.ts');
    return createPostgresEventStore(url, { ...options.postgres, ...limit });
  }
  throw new ConvergeError(
    'CONVERGE_ERR_CONFIG_INVALID',
    `store url ${JSON.stringify(url)} is not memory:, sqlite:<path>, postgres://…, esdb://… or esdb+discover://…`,
  );
}
