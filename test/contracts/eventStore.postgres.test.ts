import { after } from 'node:test';
import { createPostgresEventStore } from '../../src/store/postgres/index.ts';
import { describeOnPostgres, scratchSchema } from '../support/postgres.ts';
import { eventStoreContract } from './eventStore.contract.ts';

// The whole conformance suite against the real server on 127.0.0.1:5432, in a schema of its own
// that is dropped afterwards. The safety poll is a minute, so live tests pass only if LISTEN/NOTIFY
// (or this process's own notifier) wakes the subscriptions.
const maxEventBytes = 64 * 1024;

describeOnPostgres('PostgreSQL store', () => {
  const scratch = scratchSchema('converge_contract');
  after(() => scratch.drop());
  const open = () => createPostgresEventStore(scratch.url, { maxEventBytes, pollMs: 60_000 });
  eventStoreContract('postgres', { create: async () => open(), reopen: async () => open(), maxEventBytes });
});
