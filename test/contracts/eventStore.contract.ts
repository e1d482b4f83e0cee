import { describe } from 'node:test';
import type { EventStore } from '../../src/store/index.ts';
import { appendsContract } from './eventStore.appends.contract.ts';
import { closeReopenContract } from './eventStore.closeReopen.contract.ts';
import { nodeQueriesContract } from './eventStore.nodeQueries.contract.ts';
import { readAllContract } from './eventStore.readAll.contract.ts';
import { streamsContract } from './eventStore.streams.contract.ts';
import { subscriptionsContract } from './eventStore.subscriptions.contract.ts';
import type { StoreHarness, WithStore } from './eventStoreFixtures.ts';
import { storeStatsContract } from './storeStats.contract.ts';

// The one conformance suite every EventStore adapter passes (docs/design.md §5), its tests by
// theme in eventStore.<theme>.contract.ts and what they share in eventStoreFixtures.ts. Every
// test names its own streams and checkpoints with a random suffix, so the suite also runs
// against a shared EventStoreDB server that other runs have already written to.

export type { StoreHarness } from './eventStoreFixtures.ts';
export { aliveSeen, declarationSent, reportReceived, rolloutStarted } from './eventStoreFixtures.ts';

export function eventStoreContract(name: string, harness: StoreHarness): void {
  const opts = harness.skip === undefined ? {} : { skip: harness.skip };
  void describe(`EventStore contract: ${name}`, opts, () => {
    const withStore: WithStore = (fn: (store: EventStore) => Promise<void>) => async () => {
      const store = await harness.create();
      try {
        await fn(store);
      } finally {
        await store.close();
      }
    };
    streamsContract(withStore);
    appendsContract(harness, withStore);
    readAllContract(withStore);
    subscriptionsContract(withStore);
    nodeQueriesContract(withStore);
    closeReopenContract(harness);
    storeStatsContract(withStore);
  });
}
