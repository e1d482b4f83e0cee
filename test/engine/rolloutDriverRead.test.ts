import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createRolloutDriver } from '../../src/engine/rolloutDriver.ts';
import { startRollout } from '../../src/engine/rolloutCommands.ts';
import { rolloutStreamOf } from '../../src/core/events/index.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { testKey } from '../support/history.ts';
import { logger } from '../support/logger.ts';
import { oneWaveRollout } from '../support/oneWaveRollout.ts';
import { until } from '../support/until.ts';

// The driver's first read of a rollout is its whole stream: at 100,000 targets a hundred lists of
// 1,000 nodes, decoded and folded in one turn of the loop. It reads `readPage` events at a time,
// giving the loop back between reads, and still decides on the whole fold.

test("the driver reads a rollout's stream a page at a time and decides on all of it", async () => {
  const inner = createMemoryEventStore();
  const stream = rolloutStreamOf('big');
  const reads: (number | undefined)[] = [];
  const store: EventStore = {
    ...inner,
    readStream: (s, options) => {
      if (s === stream) reads.push(options?.limit);
      return inner.readStream(s, options);
    },
  };
  const now = (): Date => new Date('2026-11-30T12:00:00Z');
  const nodes = Array.from({ length: 4_500 }, (_, i) => `n${i + 1}`);
  await startRollout({ store, now, nodeStates: () => [] }, { ...oneWaveRollout('big', nodes, 60_000), startedBy: 'test' });
  const decisions: string[] = [];
  const driver = createRolloutDriver({
    store,
    key: testKey,
    logger,
    now,
    nodeOf: () => undefined,
    readPage: 2,
    onDecision: (_, d) => decisions.push(d.kind),
  });
  reads.length = 0;
  driver.start();
  try {
    await until('the first wave started', () => decisions.includes('startWave'));
  } finally {
    await driver.stop();
  }
  // RolloutStarted and five lists of at most 1,000 nodes: three reads of two events, and one that comes back empty.
  assert.deepEqual(reads.slice(0, 4), [2, 2, 2, 2]);
  assert.ok(
    reads.every((limit) => limit === 2),
    `every read of the stream is a page: ${reads.join(', ')}`,
  );
});
