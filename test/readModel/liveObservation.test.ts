import assert from 'node:assert/strict';
import { test } from 'node:test';
import { makeObservationStarted, makeObservationStopped } from '../../src/core/events/index.ts';
import type { Recorded } from '../../src/core/events/index.ts';
import { createLiveObservation } from '../../src/readModel/liveObservation.ts';
import { createReadModel } from '../../src/readModel/readModel.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { historyInStore, recordObservation } from '../support/history.ts';

// src/readModel/liveObservation.ts: an engine without ingest reads who observes from the record
// before its current view answers; a burst of requests shares reads.

async function readAll(store: EventStore): Promise<Recorded[]> {
  const out: Recorded[] = [];
  for await (const batch of store.readAll()) out.push(...batch);
  return out;
}

/** `store`, with its stream reads counted. */
function countingStreamReads(store: EventStore): { counted: EventStore; reads: () => number } {
  let reads = 0;
  const counted: EventStore = Object.assign(Object.create(store) as EventStore, {
    readStream: (...args: Parameters<EventStore['readStream']>) => {
      reads++;
      return store.readStream(...args);
    },
  });
  return { counted, reads: () => reads };
}

/** engine-a observing, and node a sent a declaration and heard a tick later. */
async function heardWhileObserved() {
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  await recordObservation(store, makeObservationStarted('engine-a', h.now().getTime(), 60_000, null));
  await h.send('a');
  h.tick();
  await h.heard('a');
  return { store, h };
}

test('no engine observing: counts and pages say not-observed, with the reason; an open span judges again', async () => {
  const { store, h } = await heardWhileObserved();
  await h.send('b');
  await recordObservation(store, makeObservationStopped('engine-a', h.tick(60_000).getTime(), 'stopped'));
  const now = h.tick(60 * 60_000).getTime();
  const { counted, reads } = countingStreamReads(store);
  const readModel = createReadModel({ now: () => now });
  readModel.apply(await readAll(store));
  const live = createLiveObservation({ store: counted, readModel, why: 'started without --amqp', now: () => now });

  await Promise.all(Array.from({ length: 6 }, () => live.refresh()));
  assert.ok(reads() <= 2, `a burst of six shares reads (${reads()})`);
  assert.match(readModel.unobserved() ?? '', /^this engine does not observe liveness \(started without --amqp\), and no engine has since /);
  assert.deepEqual(readModel.fleet(now).byLiveness, { connected: 0, disconnected: 0, 'never-seen': 0, 'not-observed': 2 });
  assert.equal(readModel.liveness(now).get('behind', 'not-observed'), 2);
  assert.equal(readModel.page({ limit: 10, liveness: 'not-observed' }, now).total, 2);
  assert.equal(readModel.page({ limit: 10, liveness: 'never-seen' }, now).total, 0);

  await recordObservation(store, makeObservationStarted('engine-b', now - 1_000, 60_000, null));
  await live.refresh();
  assert.equal(readModel.unobserved(), null);
  // Judged by the record again: a is held heard by it, b was never heard.
  assert.deepEqual(readModel.fleet(now).byLiveness, { connected: 1, disconnected: 0, 'never-seen': 1, 'not-observed': 0 });
});

test('an engine with ingest: by grace while it observes; as the record says while its broker is lost, and by grace again after', async () => {
  const { store, h } = await heardWhileObserved();
  // Its broker lost ten minutes later: a was never recorded silent.
  await recordObservation(store, makeObservationStopped('engine-a', h.tick(10 * 60_000).getTime(), 'broker-lost'));
  const now = h.tick(60_000).getTime();
  const { counted, reads } = countingStreamReads(store);
  const readModel = createReadModel({ now: () => now, graceMs: 60_000 });
  readModel.apply(await readAll(store));
  let lost = false;
  const live = createLiveObservation({
    store: counted,
    readModel,
    why: 'its ingest lost the broker link',
    observing: () => !lost,
    now: () => now,
  });
  const byLiveness = () => readModel.fleet(now).byLiveness;

  await live.refresh();
  assert.equal(reads(), 0, 'observing itself: no span is read');
  assert.equal(live.followsRecord(), false);
  assert.equal(byLiveness().disconnected, 1, 'by grace, as its ingest hears: a not heard for eleven minutes');

  lost = true;
  await live.refresh();
  assert.match(readModel.unobserved() ?? '', /\(its ingest lost the broker link\)/);
  assert.equal(byLiveness()['not-observed'], 1);

  // Another engine observes: the record's transition (a heard) judges.
  await recordObservation(store, makeObservationStarted('engine-b', now - 1_000, 60_000, null));
  await live.refresh();
  assert.equal(readModel.unobserved(), null);
  assert.equal(live.followsRecord(), true);
  assert.equal(byLiveness().connected, 1);

  lost = false;
  await live.refresh();
  assert.equal(live.followsRecord(), false);
  assert.equal(byLiveness().disconnected, 1, 'by grace again');
});
