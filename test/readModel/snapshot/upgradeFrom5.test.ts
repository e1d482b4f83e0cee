import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { makeObservationStarted } from '../../../src/core/events/index.ts';
import { createProjectionRunner } from '../../../src/readModel/projectionRunner.ts';
import { snapshotFormat } from '../../../src/readModel/snapshot/snapshotFile.ts';
import { trustedSnapshot } from '../../../src/readModel/snapshot/trust.ts';
import { createMemoryEventStore } from '../../../src/store/memoryEventStore.ts';
import { historyInStore, recordObservation } from '../../support/history.ts';
import { logger } from '../../support/logger.ts';
import { tempDir } from '../../support/tempDir.ts';

// An upgrade from format 5: the engine restores a snapshot with no transitions, folds on, and
// writes its next snapshot in format 6. That snapshot must be one the next start trusts: the
// transitions it keeps must be what the store says for every node, not "none" for every node
// whose latest transition came before the format-5 snapshot.

/** The same snapshot as format 5 wrote it (as test/readModel/snapshot/format.test.ts's asFormat5). */
function asFormat5(bytes: Buffer): Buffer {
  const headerEnd = bytes.indexOf(0x0a);
  const header = bytes
    .subarray(0, headerEnd)
    .toString('utf8')
    .replace(`"format":${snapshotFormat}`, '"format":5')
    .replace(',"transitions"', ' '.repeat(',"transitions"'.length));
  const part = bytes.lastIndexOf(Buffer.from('["transitions"'));
  assert.ok(part > headerEnd);
  const body = Buffer.concat([Buffer.from(header, 'utf8'), bytes.subarray(headerEnd, part - 4), Buffer.from('\n')]);
  const sha = createHash('sha256').update(body).digest('hex');
  return Buffer.concat([body, Buffer.from(`{"sha256":"${sha}"}\n`)]);
}

test('the first format-6 snapshot after restoring a format-5 one is trusted by the next start (transitions kept)', async (t) => {
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
