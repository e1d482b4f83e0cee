import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Recorded } from '../../src/core/events/index.ts';
import { createReadModel } from '../../src/readModel/readModel.ts';
import { createRolloutView } from '../../src/readModel/rollouts.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { historyInStore } from '../support/history.ts';
import { rolloutInStore } from '../support/rolloutInStore.ts';

// A node still behind when its wave times out is 'silent' only if it is not heard then
// (docs/design.md §8 "Abort criteria"). A rollout view with no ingest's exact last-seen time (the
// CLI's, an engine without ingest that drives rollouts) judges it by the record, as the current
// view does (docs/design.md §3 "Liveness as recorded"): a node that stays alive appends nothing
// after its NodeHeard, so its folded last-seen time says nothing of whether it is heard now.

test('without the ingest, a late node heard long ago and never recorded silent is a timeout, not silent', async () => {
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  await h.heard('alive');
  await h.heard('quiet');
  await h.silent('quiet', h.now().getTime(), 60_000);
  // A store written before transitions: judged by its last sign of life and the grace, as before.
  await h.alive('old');
  const r = rolloutInStore(store, h, 'late', ['alive', 'quiet', 'old', 'never'], { waveTimeoutMs: 60_000 });
  await r.start();
  await r.run();
  // An hour on: the wave timed out long ago, and every folded last-seen time is past the grace.
  const now = h.tick(60 * 60_000).getTime();

  const readModel = createReadModel({ now: () => now });
  const view = createRolloutView(readModel, { graceMs: 60_000 });
  const events: Recorded[] = [];
  for await (const batch of store.readAll()) events.push(...batch);
  readModel.apply(events);

  const late = view.progress('late')!.late(now);
  assert.deepEqual(
    late.failures.map((f) => [f.node, f.reason]),
    [
      ['alive', 'timeout'],
      ['quiet', 'silent'],
      ['old', 'silent'],
      ['never', 'silent'],
    ],
  );
  assert.deepEqual([late.timeout, late.silent], [1, 3]);
});
