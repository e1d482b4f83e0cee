import { after } from 'node:test';
import { createPostgresEventStore } from '../../src/store/index.ts';
import { postgresOrSkip, scratchSchema } from '../support/postgres.ts';
import { eventStoreContract } from './eventStore.contract.ts';

// The whole conformance suite against the real server on 127.0.0.1:5432, in a schema of its own
// that is dropped afterwards. The safety poll is long, so live tests pass only if LISTEN/NOTIFY
// (or this process's own notifier) wakes the subscriptions.
const skip = await postgresOrSkip('the PostgreSQL store contract');
const scratch = scratchSchema('converge_contract');
if (skip === undefined) after(() => scratch.drop());

const maxEventBytes = 64 * 1024;
const open = () => createPostgresEventStore(scratch.url, { maxEventBytes, pollMs: 60_000 });

eventStoreContract('postgres', {
  create: async () => open(),
  reopen: async () => open(),
  maxEventBytes,
  ...(skip === undefined ? {} : { skip }),
});
