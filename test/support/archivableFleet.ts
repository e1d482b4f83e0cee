import { createProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import type { EventStore } from '../../src/store/port.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { historyInStore } from './history.ts';
import { logger } from './logger.ts';

// A store (SQLite unless given one) with closed history to archive (docs/operations.md "Retention and archive"):
// three nodes over the 80 days up to ten days ago (sends, reports, alives, a silence and its end),
// a snapshot at `<store>.snapshot` as serve writes it, and a few events after the snapshot.

export const dayMs = 86_400_000;

export function archivableFleet(path: string): Promise<{ snapshotPosition: bigint; head: bigint }> {
  return archivableFleetIn(createSqliteEventStore(path), `${path}.snapshot`);
}

/** The same fleet in any store (closed at the end), its snapshot at `snapshotPath`. */
export async function archivableFleetIn(store: EventStore, snapshotPath: string): Promise<{ snapshotPosition: bigint; head: bigint }> {
  const h = historyInStore(store, Date.now() - 90 * dayMs);
  const nodes = ['n1', 'n2', 'n3'];
  for (let round = 0; round < 20; round++) {
    for (const node of nodes) {
      if (round % 5 === 0) {
        const s = await h.send(node);
        h.tick(60_000);
        await h.report(node, { declared: s.digest, applied: ['web'] });
      } else if (round % 7 === 3 && node === 'n3') {
        const last = h.now().getTime();
        h.tick(10 * 60_000);
        await h.silent(node, last, 60_000);
        h.tick(60_000);
        await h.heard(node, last);
      } else {
        await h.alive(node);
        h.tick(1_000);
        await h.report(node);
      }
      h.tick((4 * dayMs) / nodes.length);
    }
  }
  const runner = createProjectionRunner({ store, logger, snapshot: { path: snapshotPath, everyEvents: 1_000_000 } });
  await runner.start();
  await runner.caughtUp();
  await runner.writeSnapshot();
  await runner.stop();
  const snapshotPosition = (await store.headPosition())!;
  await h.alive('n1');
  await h.report('n2');
  const head = (await store.headPosition())!;
  await store.close();
  return { snapshotPosition, head };
}
