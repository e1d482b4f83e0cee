import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { eventStoreContract } from './eventStore.contract.ts';

const maxEventBytes = 64 * 1024;

eventStoreContract('memory', {
  create: async () => createMemoryEventStore({ maxEventBytes }),
  reopenSkip: 'a memory store keeps nothing once closed; reopening means a new, empty store',
  maxEventBytes,
});
