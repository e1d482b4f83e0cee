import assert from 'node:assert/strict';
import { test } from 'node:test';
import { makeObservationStarted, makeObservationStopped } from '../../src/core/events/index.ts';
import type { Recorded } from '../../src/core/events/index.ts';
import { createLiveObservation, observedFrom } from '../../src/readModel/liveObservation.ts';
import { createReadModel } from '../../src/readModel/readModel.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { historyInStore, recordObservation } from '../support/history.ts';
import { until } from '../support/until.ts';

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

test('a store that does not answer holds no answer: refresh ends with the last judgement, the read goes on', async () => {
  const store = createMemoryEventStore();
  const now = Date.parse('2026-12-01T12:00:00Z');
  let answer: (() => void) | null = null;
  // The engine's PostgreSQL link cut: a read of the spans waits until the test lets it go.
  const hanging: EventStore = Object.assign(Object.create(store) as EventStore, {
    readStream: async (...args: Parameters<EventStore['readStream']>) => {
      await new Promise<void>((resolve) => (answer = resolve));
      return store.readStream(...args);
    },
  });
  await recordObservation(store, makeObservationStarted('engine-b', now - 1_000, 60_000, null));
  const readModel = createReadModel({ now: () => now, graceMs: 60_000 });
  readModel.setUnobserved('the judgement before');
  const live = createLiveObservation({
    store: hanging,
    readModel,
    why: 'its ingest lost the broker link',
    observing: () => false,
    now: () => now,
  });
  let ended = false;
  void live.refresh().then(() => (ended = true));
  await until('a refresh to end while its read waits on the store', () => ended, 30_000);
  assert.equal(readModel.unobserved(), 'the judgement before', 'the last judgement stands');
  await until('the read to have begun', () => answer !== null, 30_000);
  answer!();
  await until('the read, once answered, to judge again', () => readModel.unobserved() === null, 30_000);
});

test('observedFrom: the start of the unbroken observation covering a moment, joined across engines, broken by a gap', () => {
  const spans = [
    { from: 100, to: 200 },
    { from: 150, to: 300 },
    { from: 301, to: null },
  ];
  assert.equal(observedFrom([], 50), Number.NEGATIVE_INFINITY, 'a store with no span: observed, with no break known');
  assert.equal(observedFrom(spans, 50), Number.NEGATIVE_INFINITY, 'before the first span');
  assert.equal(observedFrom(spans, 250), 100, "two engines' overlapping spans join");
  assert.equal(observedFrom(spans, 500), 301, 'a gap of a millisecond breaks it: a blip');
  assert.equal(observedFrom([{ from: 100, to: 200 }], 250), null, 'none observing');
});
