import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { makeObservationStarted } from '../../../src/core/events/index.ts';
import { createLiveObservation, currentLiveness } from '../../../src/readModel/liveObservation.ts';
import { createProjectionRunner } from '../../../src/readModel/projectionRunner.ts';
import type { ProjectionRunner } from '../../../src/readModel/projectionRunner.ts';
import { createMemoryEventStore } from '../../../src/store/memoryEventStore.ts';
import type { EventStore } from '../../../src/store/index.ts';
import { historyInStore, recordObservation } from '../../support/history.ts';
import { logger } from '../../support/logger.ts';
import { tempDir } from '../../support/tempDir.ts';

// The current view of an engine without ingest judges a node by its latest recorded transition
// (docs/design.md §3 "Liveness as recorded"). A snapshot keeps each node's, so a restored engine
// answers as one that folded from zero: a node heard an hour ago and never recorded silent is
// connected in both, not disconnected by the grace in the restored one.

const nodes = ['alive', 'quiet', 'unheard'];

async function answers(store: EventStore, runner: ProjectionRunner, now: number) {
  const { readModel } = runner;
  const live = createLiveObservation({ store, readModel, why: 'started without --amqp', now: () => now });
  await live.refresh();
  return {
    fleet: readModel.fleet(now).byLiveness,
    pages: (['connected', 'disconnected', 'never-seen', 'not-observed'] as const).map((l) => [
      l,
      readModel.page({ limit: 10, liveness: l }, now).total,
    ]),
    current: nodes.map((n) => [n, currentLiveness(readModel, readModel.get(n)!, now, true)?.state ?? 'by grace']),
    transitions: nodes.map((n) => [n, readModel.transitionOf(n)]),
  };
}

test('restored from a snapshot, the view without ingest answers as the fold from zero: by each node recorded transition', async (t) => {
  const dir = tempDir(t, 'converge-snapshot-transitions-');
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  // Another engine observes throughout (its span is open); this one runs no ingest.
  await recordObservation(store, makeObservationStarted('engine-b', h.now().getTime(), 60_000, null));
  for (const n of nodes) await h.send(n);
  await h.heard('alive');
  await h.heard('quiet');
  await h.silent('quiet', h.now().getTime(), 60_000);
  const now = h.tick(60 * 60_000).getTime();
  const snapshot = { path: join(dir, 'store.snapshot'), everyEvents: 1_000_000 };

  const writer = createProjectionRunner({ store, logger, snapshot, now: () => now });
  t.after(() => writer.stop());
  await writer.start();
  await writer.caughtUp();
  await writer.writeSnapshot();
  const fromZero = await answers(store, writer, now);

  const restored = createProjectionRunner({ store, logger, snapshot, now: () => now });
  t.after(() => restored.stop());
  await restored.start();
  assert.equal(restored.readModel.position(), await store.headPosition(), 'restored from the snapshot, nothing after it to fold');
  await restored.caughtUp();
  assert.deepEqual(fromZero.current, [
    ['alive', 'connected'],
    ['quiet', 'disconnected'],
    ['unheard', 'by grace'],
  ]);
  assert.deepEqual(await answers(store, restored, now), fromZero);
});
