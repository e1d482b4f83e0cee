import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { createProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import { compareStates, replayStore } from '../../src/readModel/replay.ts';
import { withArchive } from '../../src/store/archive/withArchive.ts';
import { archiveSqliteStore } from '../../src/store/sqlite/sqliteArchive.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { archivableFleet, dayMs } from '../support/archivableFleet.ts';
import { historyInStore } from '../support/history.ts';
import { logger } from '../support/logger.ts';

// docs/operations.md "Retention and archive": only history below the latest snapshot is archived,
// so a warm start restores the snapshot and folds what came after, never opening the archive. Here
// the archive folder is gone while the engine starts: a start that read it would fail or fold less.

const dir = mkdtempSync(join(tmpdir(), 'converge-archive-warm-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('a warm start over an archived store restores the snapshot and folds only what came after, without the archive', async () => {
  const path = join(dir, 'fleet.db');
  const archive = join(dir, 'archive');
  const { snapshotPosition, head } = await archivableFleet(path);
  const moved = await archiveSqliteStore(path, {
    dir: archive,
    before: new Date(Date.now() - 30 * dayMs).toISOString(),
    belowPosition: snapshotPosition,
  });
  assert.ok(moved.events > 20);

  renameSync(archive, `${archive}.away`);
  const store = createSqliteEventStore(path);
  try {
    const runner = createProjectionRunner({ store, logger, snapshot: { path: `${path}.snapshot`, everyEvents: 1_000_000 } });
    const folded: bigint[] = [];
    runner.readModel.onChange((c) => folded.push(c.position));
    await runner.start();
    await runner.caughtUp();
    await runner.stop();
    const after: bigint[] = [];
    for (let p = snapshotPosition + 1n; p <= head; p++) after.push(p);
    assert.deepEqual(folded, after, 'restored from the snapshot (not refused, not folded from the hot rows)');

    // The same states as a fold from zero over the archive and the store.
    renameSync(`${archive}.away`, archive);
    const replayed = await replayStore(await withArchive(store, archive));
    assert.deepEqual(compareStates(replayed, runner.readModel.nodes()), []);
    assert.equal(replayed.size, 3);
  } finally {
    await store.close();
  }
});

test('a start with no usable snapshot over an archived store folds the archive too, or refuses without it', async () => {
  const path = join(dir, 'cold.db');
  const archive = join(dir, 'cold-archive');
  const { snapshotPosition } = await archivableFleet(path);
  const moved = await archiveSqliteStore(path, {
    dir: archive,
    before: new Date(Date.now() - 30 * dayMs).toISOString(),
    belowPosition: snapshotPosition,
  });
  assert.ok(moved.events > 20);
  // As after an upgrade whose fold version refuses the snapshot: nothing to restore.
  rmSync(`${path}.snapshot`, { force: true });
  const store = createSqliteEventStore(path);
  try {
    const blind = createProjectionRunner({ store, logger });
    await blind.start();
    await assert.rejects(blind.caughtUp(), /segment\(s\) of this store's history are in its archive: give --archive-dir/);
    await blind.stop();

    const runner = createProjectionRunner({ store, logger, coldStore: () => withArchive(store, archive) });
    await runner.start();
    await runner.caughtUp();
    await runner.stop();
    const replayed = await replayStore(await withArchive(store, archive));
    assert.deepEqual(compareStates(replayed, runner.readModel.nodes()), []);
    assert.equal([...runner.readModel.nodes()].length, 3);
  } finally {
    await store.close();
  }
});

test('a warm start trusts a snapshot whose node kept its first event hot while later ones were archived', async () => {
  // A node sent once: its first event is its last send, kept hot at revision 0, while the liveness
  // transitions after it are archived; its hot stream has a gap in the middle, not at its start.
  const path = join(dir, 'gap.db');
  const archive = join(dir, 'gap-archive');
  const store = createSqliteEventStore(path);
  const h = historyInStore(store, Date.now() - 40 * dayMs);
  const s = await h.send('n1');
  h.tick(60_000);
  await h.report('n1', { declared: s.digest, applied: ['web'] });
  const last = h.now().getTime();
  h.tick(10 * 60_000);
  await h.silent('n1', last, 60_000);
  h.tick(60_000);
  await h.heard('n1', last);
  h.tick(60_000);
  await h.retire('n1');
  const runner = createProjectionRunner({ store, logger, snapshot: { path: `${path}.snapshot`, everyEvents: 1_000_000 } });
  await runner.start();
  await runner.caughtUp();
  await runner.writeSnapshot();
  await runner.stop();
  const snapshotPosition = (await store.headPosition())!;
  await h.alive('n2');
  await store.close();
  const moved = await archiveSqliteStore(path, {
    dir: archive,
    before: new Date(Date.now() - 30 * dayMs).toISOString(),
    belowPosition: snapshotPosition + 1n,
  });
  assert.equal(moved.events, 2, 'the silence and its end archived, the send, the report and the retirement kept hot');

  const again = createSqliteEventStore(path);
  try {
    const warm = createProjectionRunner({ store: again, logger, snapshot: { path: `${path}.snapshot`, everyEvents: 1_000_000 } });
    const folded: bigint[] = [];
    warm.readModel.onChange((c) => folded.push(c.position));
    await warm.start();
    await warm.caughtUp();
    await warm.stop();
    assert.deepEqual(folded, [snapshotPosition + 1n], 'restored from the snapshot, not refused by its cross-check');
  } finally {
    await again.close();
  }
});
