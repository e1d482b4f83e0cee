import type { EventStoreDBClient } from '@eventstore/db-client';

/** The part of `EventStoreDBClient` the EventStoreDB store calls (test/contracts/fakeEsdbClient.ts emulates it). */
export type EsdbClient = Pick<
  EventStoreDBClient,
  'appendToStream' | 'readStream' | 'readAll' | 'subscribeToAll' | 'setStreamMetadata' | 'dispose'
>;
