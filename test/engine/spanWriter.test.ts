import assert from 'node:assert/strict';
import { test } from 'node:test';
import { makeObservationStarted, observationStream } from '../../src/core/events/index.ts';
import { createSpanWriter } from '../../src/engine/liveness/spanWriter.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { logger } from '../support/logger.ts';

// src/engine/liveness/spanWriter.ts: span events are appended in the order asked; a job that
// throws is logged and the writes after it still land.

test('a job that throws leaves the span events after it written', async () => {
  const store = createMemoryEventStore();
  const spans = createSpanWriter(store, logger);
  await spans.write(() => {
    throw new Error('a recorder that failed');
  });
  await spans.write(() => makeObservationStarted('engine-a', Date.parse('2026-12-01T12:00:00Z'), 60_000, null));
  const events = await store.readStream(observationStream);
  assert.deepEqual(
    events.map((e) => e.type),
    ['ObservationStarted'],
  );
  assert.equal(spans.unwritten(), 0);
});
