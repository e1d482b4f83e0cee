// PostgreSQL event store: see ./postgresEventStore.ts, and ./append.ts for why a
// reader never skips an event.
export { createPostgresEventStore, parsePostgresUrl } from './postgresEventStore.ts';
export type { PostgresEventStoreOptions } from './postgresEventStore.ts';
export { postgresSchemaVersion } from './schema.ts';
