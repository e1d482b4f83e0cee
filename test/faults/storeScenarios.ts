import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { mountTinyTmpfs } from '../support/faults/tinyTmpfs.ts';
import { withStoreFaults } from '../support/faults/withStoreFaults.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { sleep, until } from '../support/until.ts';
import { startEngine } from './faultScenario.ts';
import type { Scenario } from './faultScenario.ts';
import { startLoad, PER_NODE, PACE_MS, withNodes } from './faultNodes.ts';
import { recoveryFrom, settleAll, tally } from './faultTally.ts';

// Fault scenarios on the engine's store: unavailable for a while, and a full disk.

export const storeUnavailable: Scenario = {
  name: 'store unavailable',
  faults: 'appends fail (STORE_UNAVAILABLE) for 3 s, then 5 appends whose ack is lost after writing',
  run: (lab) =>
    withNodes(lab, 'st', 3, async (nodes) => {
      const inner = createSqliteEventStore(join(lab.dir, 'store.db'));
      const store = withStoreFaults(inner);
      const engine = await startEngine(lab.engineUrl, store);
      try {
        const load = startLoad(nodes, PER_NODE, PACE_MS);
        await until('some load to flow', () => load.confirmed().size >= (PER_NODE * nodes.length) / 4);
        store.faults.failAppends(true);
        await until('ingest to report the store unhealthy', () => !engine.ingest.isHealthy(), 10_000);
        await sleep(3_000);
        store.faults.failAppends(false);
        store.faults.loseAppendAcks(5);
        const recovering = recoveryFrom(() => inner, load, false);
        await load.done;
        const recover = await recovering;
        await settleAll(() => inner, load);
        const c = store.faults.counters();
        return await tally(storeUnavailable, inner, load, recover, {
          notes: [
            `${c.appendsFailed} append(s) failed, ${c.appendAcksLost} ack(s) lost after writing (each lost ack costs the ingest one retry backoff)`,
          ],
          checks: { appendsFailed: c.appendsFailed > 0, acksLost: c.appendAcksLost === 5, ingestHealthyAgain: engine.ingest.isHealthy() },
        });
      } finally {
        await engine.stop();
        await store.close();
      }
    }),
};

export const diskFull: Scenario = {
  name: 'disk full (tmpfs)',
  faults: 'SQLite on a 192 KiB tmpfs fills up (SQLITE_FULL); then remounted at 64 MiB',
  run: async (lab) => {
    const fs = mountTinyTmpfs(192);
    if ('unavailable' in fs) {
      return {
        scenario: diskFull.name,
        faults: diskFull.faults,
        sent: 0,
        confirmed: 0,
        stored: 0,
        lost: 0,
        duplicated: 0,
        hostileTried: 0,
        hostileAppended: 0,
        recoverMs: null,
        notes: [`skipped: ${fs.unavailable}`],
        checks: {},
      };
    }
    try {
      return await withNodes(lab, 'full', 3, async (nodes) => {
        const store = createSqliteEventStore(join(fs.dir, 'events.db'));
        const engine = await startEngine(lab.engineUrl, store);
        try {
          const load = startLoad(nodes, PER_NODE * 3, 0);
          const filled = await until('the disk to fill and ingest to hold', () => !engine.ingest.isHealthy(), 60_000).then(
            () => true,
            () => false,
          );
          await sleep(1_000);
          await promisify(execFile)('mount', ['-o', 'remount,size=64m', fs.dir]);
          const recovering = recoveryFrom(() => store, load, false);
          await load.done;
          const recover = await recovering;
          await settleAll(() => store, load);
          return await tally(diskFull, store, load, recover, {
            notes: [
              filled ? 'ingest held deliveries unacked while the disk was full (SQLITE_FULL)' : 'the disk never filled (load too small)',
            ],
            checks: { diskFilled: filled, ingestHealthyAgain: engine.ingest.isHealthy() },
          });
        } finally {
          await engine.stop();
          await store.close();
        }
      });
    } finally {
      fs.unmount();
    }
  },
};
