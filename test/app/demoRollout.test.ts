import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from '../../src/app/config.ts';
import { createDemo } from '../../src/app/demo.ts';
import { readRollout } from '../../src/engine/rolloutCommands.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { testKey } from '../support/history.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';

// The demo fleet rolled out to in waves by the engine's own driver (the
// wiring `serve` uses), halting on the refusing node with the degraded one in the last wave.

test('the demo fleet: waves 1, 10%, 50% go through; the last wave has the degraded and the refusing node and halts', async () => {
  const config = loadConfig({ flags: { store: 'memory:', port: '0' }, env: {} });
  const store = createMemoryEventStore();
  const demo = await createDemo({ config, logger, store, key: testKey, nodes: 12, intervalMs: 40 });
  await demo.start();
  try {
    // "Every node" is every node the read model knows: each says alive when it starts.
    await until('every demo node to say alive', () => demo.server.runner.readModel.size() === 12);
    const { rollout, targets, waves } = await demo.rollout(1, { waves: '1,10%,50%,100%', maxFailures: '1' });
    assert.equal(targets, 12);
    assert.deepEqual(waves, [1, 2, 6, 12]);
    const s = await until('the rollout to halt', async () => {
      const r = await readRollout(store, rollout);
      return r?.status === 'halted' ? r : null;
    });
    assert.deepEqual(
      s.waves.map((w) => w.completed?.done ?? null),
      [1, 1, 4, null],
    );
    assert.equal(s.halted?.wave, 4);
    assert.deepEqual(s.halted?.failed.map((f) => [f.node, f.reason]).sort(), [
      [demo.cast.degraded, 'degraded'],
      [demo.cast.refusing, 'refused'],
    ]);
  } finally {
    await demo.stop();
  }
});
