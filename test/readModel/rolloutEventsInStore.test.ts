import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createRaceScanner } from '../../projections/index.ts';
import { makeRolloutEvent } from '../../src/core/events/index.ts';
import { createProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import { replayStore, verifyReadModel } from '../../src/readModel/replay.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { rolloutStarted } from '../contracts/eventStore.contract.ts';
import { historyInStore } from '../support/history.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';

// Rollout streams share the store with the node streams. They must fold into no node,
// and nothing that reads the whole store (the read model, replay --verify, forensics) may trip
// on them or count them.

test('rollout events in the store fold into no node: the read model moves past them and still equals a replay', async () => {
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  await h.send('n1');
  await store.append([{ stream: 'rollout-r1', expected: 'no_stream', events: [rolloutStarted('r1', ['n1'])] }]);
  const tagged = await h.send('n1', [{ id: 'web' }], { id: 'r1', wave: 1 });
  await h.report('n1', { declared: tagged.digest, applied: ['web'] });
  const head = await store.append([
    {
      stream: 'rollout-r1',
      expected: 0n,
      events: [makeRolloutEvent('RolloutPaused', { rollout: 'r1', by: 't', reason: '', at: h.now().toISOString() }, { revision: 0n })],
    },
  ]);

  const runner = createProjectionRunner({ store, logger });
  await runner.start();
  try {
    await until('folded to the head', () => runner.readModel.position() === head.position);
    assert.deepEqual(
      [...runner.readModel.nodes()].map((s) => s.node),
      ['n1'],
    );
    assert.equal(runner.readModel.get('n1')?.status, 'converged');
    assert.equal(await runner.lag(), 0n);
    assert.deepEqual(await verifyReadModel(store, runner.readModel), []);
    assert.deepEqual([...(await replayStore(store)).keys()], ['n1']);
    const races = createRaceScanner();
    for await (const batch of store.readAll()) for (const e of batch) assert.equal(races.push(e), null);
  } finally {
    await runner.stop();
  }
});
