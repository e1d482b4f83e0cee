import pino from 'pino';
import { createProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';

/**
 * The engine's snapshot of the SQLite store at `storePath`, written to `snapshotPath` as `serve`
 * writes it at stop (the store folded from zero by the projection runner). Returns the position it
 * holds, the store's head.
 */
export async function writeServeSnapshot(storePath: string, snapshotPath: string): Promise<bigint | null> {
  const store = createSqliteEventStore(storePath);
  try {
    const runner = createProjectionRunner({
      store,
      logger: pino({ level: 'silent' }),
      snapshot: { path: snapshotPath, everyEvents: 1e12 },
    });
    await runner.start();
    await runner.caughtUp();
    await runner.writeSnapshot();
    await runner.stop();
    return await store.headPosition();
  } finally {
    await store.close();
  }
}
