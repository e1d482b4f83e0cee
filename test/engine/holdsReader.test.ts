import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConvergeError } from '../../src/core/errors.ts';
import { createHoldsReader } from '../../src/engine/holds.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { sleep } from '../support/until.ts';

// A refresh while the store is down fails its caller (a POST answered 503) and nothing else: the
// PostgreSQL restart scenario (test/faults/postgresFailoverScenario.ts) found serve ending on an
// unhandled rejection of the reader's own bookkeeping.

test('a refresh the store fails rejects only for its caller, and the next one reads again', async () => {
  const store = createMemoryEventStore();
  let down = true;
  const failing = {
    ...store,
    readStream: async (...args: Parameters<typeof store.readStream>) => {
      if (down) throw new ConvergeError('CONVERGE_ERR_STORE_UNAVAILABLE', 'read holds: connect ECONNREFUSED');
      return store.readStream(...args);
    },
  };
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  try {
    const reader = createHoldsReader(failing);
    await assert.rejects(reader.refresh(), { code: 'CONVERGE_ERR_STORE_UNAVAILABLE' });
    await sleep(20);
    assert.deepEqual(unhandled, []);
    down = false;
    assert.equal((await reader.refresh()).revision, -1n);
  } finally {
    process.off('unhandledRejection', onUnhandled);
  }
});
