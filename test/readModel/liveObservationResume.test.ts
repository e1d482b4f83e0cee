import assert from 'node:assert/strict';
import { test } from 'node:test';
import { makeObservationStarted, makeObservationStopped } from '../../src/core/events/index.ts';
import { createLiveObservation } from '../../src/readModel/liveObservation.ts';
import { createReadModel } from '../../src/readModel/readModel.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { historyInStore, recordObservation } from '../support/history.ts';

// src/readModel/liveObservation.ts for an engine with ingest (`observing`): while its broker link is
// lost it reads the spans; once it consumes again it judges by grace, with no read needed. A read
// started while the store was cut too (it never answers) must not keep the view "not observed"
// after the ingest consumes again.

test('consuming again, the current view is observed at once, even while a spans read started during the cut hangs', async (t) => {
  const base = createMemoryEventStore();
  const h = historyInStore(base);
  await recordObservation(base, makeObservationStarted('engine-a', h.now().getTime(), 60_000, null));
  h.tick();
  await recordObservation(base, makeObservationStopped('engine-a', h.now().getTime(), 'broker-lost'));
  h.tick();
  let hang = false;
  const held: (() => void)[] = [];
  t.after(() => {
    hang = false;
    held.forEach((r) => r());
  });
  const store: EventStore = Object.assign(Object.create(base) as EventStore, {
    readStream: (...args: Parameters<EventStore['readStream']>) =>
      hang ? new Promise<never>((_, reject) => held.push(() => reject(new Error('cut')))) : base.readStream(...args),
  });
  const readModel = createReadModel();
  let consuming = false;
  const live = createLiveObservation({
    store,
    readModel,
    why: 'its ingest lost the broker link',
    observing: () => consuming,
    readWaitMs: 10,
    now: () => h.now().getTime(),
  });

  await live.refresh();
  assert.notEqual(readModel.unobserved(), null, 'cut off: not observed');

  // The store is cut as well: a request's read of the spans never answers.
  hang = true;
  await live.refresh();

  // The broker link comes back (the store still cut): ingest consumes, this engine observes.
  consuming = true;
  await live.refresh();
  assert.equal(readModel.unobserved(), null, 'consuming again, yet the view still says not observed');
  assert.equal(live.followsRecord(), false, 'consuming again, yet the view still follows the record');
});
