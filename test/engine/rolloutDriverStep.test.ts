import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createRolloutDriver } from '../../src/engine/rolloutDriver.ts';
import { readRollout, startRollout } from '../../src/engine/rolloutCommands.ts';
import { makeRolloutEvent, rolloutStreamOf } from '../../src/core/events/index.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { testKey } from '../support/history.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';

// One rollout's turn in a round of the driver (src/engine/rolloutDriverStep.ts), as far as it
// can be seen from outside: what it reads to decide.

const names = (from: number, to: number): string[] => Array.from({ length: to - from }, (_, i) => `n${from + i + 1}`);

test('once a wave is completed the driver opens the next without counting the completed one over its nodes', async () => {
  // Counting the open wave over its nodes is the driver's last resort, when the read side has
  // not folded its latest events: right after recording a WaveCompleted it always has not, and
  // a count of a wave already completed decides nothing (the next wave opens on the record).
  const store = createMemoryEventStore();
  const t = Date.parse('2026-11-30T12:00:00Z');
  const now = (): Date => new Date(t);
  const all = names(0, 20);
  const first = names(0, 10);
  await startRollout(
    { store, now, nodeStates: () => [] },
    {
      rollout: 'r1',
      resources: [{ id: 'web', image: 'nginx:1.27' }],
      selection: { kind: 'nodes', nodes: all },
      waves: '10,100%',
      maxFailures: '0',
      waveTimeoutMs: 60_000,
      startedBy: 'test',
    },
  );
  const at = now().toISOString();
  const digest = 'a'.repeat(64);
  const stream = rolloutStreamOf('r1');
  // Wave 1 sent and completed, as a driver before this one recorded it.
  await store.append([
    {
      stream,
      expected: 1n,
      events: [
        makeRolloutEvent('WaveStarted', { rollout: 'r1', wave: 1, from: 0, to: 10, startedAt: at }, { revision: 1n }),
        makeRolloutEvent(
          'RolloutSent',
          { rollout: 'r1', wave: 1, sends: first.map((node) => ({ node, serial: 1, digest })), skipped: [], sentAt: at },
          { revision: 2n },
        ),
        makeRolloutEvent(
          'WaveCompleted',
          { rollout: 'r1', wave: 1, completedAt: at, done: 10, failed: 0, superseded: 0, failures: [], supersededNodes: [] },
          { revision: 3n },
        ),
      ],
    },
  ]);
  const looked = new Set<string>();
  const driver = createRolloutDriver({
    store,
    key: testKey,
    logger,
    now,
    nodeOf: (node) => {
      looked.add(node);
      return undefined;
    },
    readModelPosition: () => null,
    pollMs: 1,
    minIntervalMs: 0,
  });
  driver.start();
  try {
    await until('wave 2 to be sent', async () => (await readRollout(store, 'r1'))?.sends.has('n20') === true);
  } finally {
    await driver.stop();
  }
  const s = await readRollout(store, 'r1');
  assert.equal(s?.current, 2);
  assert.deepEqual(
    first.filter((n) => looked.has(n)),
    [],
    'no node of the completed wave was looked at',
  );
});
