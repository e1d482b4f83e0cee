// PostgreSQL event store (issue 12): see ./postgresEventStore.ts, and ./append.ts for why a
// reader never skips an event.
export { createPostgresEventStore, parsePostgresUrl } from './postgresEventStore.ts';
export type { PostgresEventStoreOptions } from './postgresEventStore.ts';
export { postgresSchemaVersion } from './schema.ts';
