// The event store (DESIGN §5): one port, three adapters, one factory.
export type * from './port.ts';
export { createMemoryEventStore } from './memoryEventStore.ts';
export type { MemoryEventStoreOptions } from './memoryEventStore.ts';
export { defaultMaxEventBytes } from './appendRules.ts';
export { createSqliteEventStore, sqliteSchemaVersion } from './sqliteEventStore.ts';
export type { SqliteEventStoreOptions } from './sqliteEventStore.ts';
