import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { makeObservationStarted } from '../../../src/core/events/index.ts';
import { createProjectionRunner } from '../../../src/readModel/projectionRunner.ts';
import { trustedSnapshot } from '../../../src/readModel/snapshot/trust.ts';
import { createMemoryEventStore } from '../../../src/store/memoryEventStore.ts';
import { historyInStore, recordObservation } from '../../support/history.ts';
import { logger } from '../../support/logger.ts';
import { tempDir } from '../../support/tempDir.ts';
import { asFormat5 } from '../../support/snapshotFormat5.ts';

// An upgrade from format 5: the engine restores a snapshot with no transitions, folds on, and
// writes its next snapshot in format 6. That snapshot must be one the next start trusts, though it
// cannot know the transitions folded before the format-5 snapshot: it keeps "none" for those
// nodes, which the cross-check reads as unknown, not as a claim (src/readModel/snapshot/trust.ts).

test('the first format-6 snapshot after restoring a format-5 one is trusted by the next start', async (t) => {
  const dir = tempDir(t, 'converge-snapshot-upgrade5-');
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  await recordObservation(store, makeObservationStarted('engine-b', h.now().getTime(), 60_000, null));
  await h.send('quiet');
  await h.heard('quiet');
  await h.silent('quiet', h.now().getTime(), 60_000);
  const snapshot = { path: join(dir, 'store.snapshot'), everyEvents: 1_000_000 };

  // The release before: its snapshot is format 5.
  const old = createProjectionRunner({ store, logger, snapshot });
  await old.start();
  await old.caughtUp();
  await old.writeSnapshot();
  await old.stop();
  writeFileSync(snapshot.path, asFormat5(readFileSync(snapshot.path)));

  // The upgraded engine restores it, folds one more event (another node's), and writes format 6.
  await h.send('other');
  const upgraded = createProjectionRunner({ store, logger, snapshot });
  t.after(() => upgraded.stop());
  await upgraded.start();
  await upgraded.caughtUp();
  await upgraded.writeSnapshot();
  await upgraded.stop();

  const outcome = await trustedSnapshot(store, snapshot.path);
  assert.equal(outcome.kind, 'trusted', outcome.kind === 'rejected' ? `rejected: ${(outcome.err as Error).message}` : outcome.kind);
});
