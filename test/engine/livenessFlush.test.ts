import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createLivenessObserver, flushChunk } from '../../src/engine/liveness/observer.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { logger } from '../support/logger.ts';

// The last-seen lease's flush after a rollout's wave (tens of thousands of nodes heard at once):
// written in chunks of `flushChunk` nodes, each its own write, so neither taking the changes nor
// handing them to the store holds one turn of the loop for the whole fleet. Only the last chunk
// moves the engine's flush time: after a crash between two chunks the lease still says every
// node's time is stored as of the flush before, which holds.

const T0 = Date.parse('2026-03-01T00:00:00Z');

test('a flush of many nodes is written in chunks; only the last moves the flush time', async () => {
  const inner = createMemoryEventStore();
  const writes: { flushedAt: number; nodes: number }[] = [];
  const store: EventStore = {
    ...inner,
    saveLastSeen: async (engine, flushedAt, nodes) => {
      writes.push({ flushedAt, nodes: nodes.length });
      await inner.saveLastSeen(engine, flushedAt, nodes);
    },
  };
  let wall = T0;
  const observer = createLivenessObserver({
    store,
    logger,
    engine: 'e1',
    graceMs: 60_000,
    flushMs: 3_600_000,
    enqueue: () => undefined,
    now: () => wall,
    mono: () => wall - T0,
  });
  await observer.start();
  observer.consuming();
  const started = wall;
  const n = flushChunk * 2 + 7;
  wall += 1_000;
  for (let i = 0; i < n; i++) observer.recorder.heard(`n-${i}`, wall, wall - T0);
  wall += 1_000;
  await observer.stop();

  assert.deepEqual(
    writes.map((w) => w.nodes),
    [flushChunk, flushChunk, 7],
  );
  assert.deepEqual(
    writes.map((w) => w.flushedAt),
    [started, started, wall],
    'the chunks before the last keep the flush time of what was stored before',
  );
  const lease = await inner.loadLastSeen();
  assert.equal(lease.nodes.size, n);
  assert.equal(lease.flushes.get('e1'), wall);
});
