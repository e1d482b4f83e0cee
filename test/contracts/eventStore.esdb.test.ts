import { createEsdbEventStore } from '../../src/store/esdb/esdbEventStore.ts';
import { eventStoreContract } from './eventStore.contract.ts';

// Runs only against a real server: no EventStoreDB can be started inside the test run.
const url = process.env.EVENTSTORE_URL;
const maxEventBytes = 64 * 1024;

if (url === undefined || url === '') console.log('skipped: no EventStoreDB (set EVENTSTORE_URL=esdb://localhost:2113?tls=false)');

eventStoreContract('esdb', {
  create: async () => createEsdbEventStore(url ?? 'esdb://localhost:2113?tls=false', { maxEventBytes }),
  // The server keeps everything; a fresh client on the same server is the reopened store.
  reopen: async () => createEsdbEventStore(url ?? 'esdb://localhost:2113?tls=false', { maxEventBytes }),
  maxEventBytes,
  ...(url === undefined || url === '' ? { skip: 'skipped: no EventStoreDB (set EVENTSTORE_URL=esdb://localhost:2113?tls=false)' } : {}),
  crossStreamAtomicitySkip: 'EventStoreDB has no cross-stream transaction: a many-stream append is atomic per stream (docs/store.md)',
  crossStreamDuplicateIdSkip:
    'EventStoreDB checks event ids per stream only; an id reused in another stream is not detected (docs/store.md)',
});
