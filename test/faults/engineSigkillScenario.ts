import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import fc from 'fast-check';
import { createProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import { compareStates, replayStore } from '../../src/readModel/replay.ts';
import { readSnapshot } from '../../src/readModel/snapshot/snapshotFile.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { killHard, startFaultChild, stopGently } from '../support/faults/faultChild.ts';
import { logger } from '../support/logger.ts';
import { sleep, until } from '../support/until.ts';
import { faultSeed } from './faultScenario.ts';
import type { Scenario } from './faultScenario.ts';
import { startLoad, PACE_MS, withNodes } from './faultNodes.ts';
import { recoveryFrom, settleAll, tally } from './faultTally.ts';

// The engine SIGKILLed under load at seeded moments and restarted each time.

/** Kills per SIGKILL run: at least 20 in CI; more with CONVERGE_FAULT_KILLS. */
export const sigkillCount = (): number => Math.max(1, Number(process.env['CONVERGE_FAULT_KILLS'] ?? 20));

export const engineSigkill: Scenario = {
  name: 'engine SIGKILL',
  faults: `engine process (ingest + projections with snapshots, as \`serve\`) SIGKILLed ${sigkillCount()}× at seeded random moments under load, restarted each time`,
  run: (lab) =>
    withNodes(lab, 'kill', 3, async (nodes) => {
      const path = join(lab.dir, 'sigkill.db');
      const snapshotPath = `${path}.snapshot.json`;
      const kills = sigkillCount();
      const seed = faultSeed('engine SIGKILL');
      // When each kill lands: this long after the restarted engine said it was consuming (0 ms
      // included: a kill during the first fetch, before a batch was written or acked).
      const dwellMs = fc.sample(fc.integer({ min: 0, max: 400 }), { numRuns: kills, seed });
      const spawnChild = (): Promise<ChildProcess> =>
        startFaultChild('./ingestChild.ts', {
          CONVERGE_FAULT_AMQP_URL: lab.engineUrl,
          CONVERGE_FAULT_STORE: path,
          CONVERGE_FAULT_SNAPSHOT: snapshotPath,
          CONVERGE_FAULT_SNAPSHOT_EVERY: '250',
        });
      let child = await spawnChild();
      const reader = createSqliteEventStore(path);
      let killed = 0;
      try {
        // Load runs until the last restart, so every kill lands mid-stream.
        const load = startLoad(nodes, Infinity, PACE_MS);
        let recovering: Promise<number | null> = Promise.resolve(null);
        await until('some load to flow', () => load.confirmed().size >= 3 * nodes.length);
        for (const dwell of dwellMs) {
          await sleep(dwell);
          await killHard(child);
          killed++;
          // Recovery counts the restart itself: from the kill to every confirmed report stored.
          recovering = recoveryFrom(() => reader, load, true);
          child = await spawnChild();
        }
        // Give the last restart a report confirmed after it, then end the load.
        const n = load.confirmed().size;
        await until('load to flow after the last restart', () => load.confirmed().size >= n + nodes.length);
        load.finish();
        await load.done;
        const recover = await recovering;
        await settleAll(() => reader, load);
        // The last engine dies as the others did, so the snapshot left is one a kill left.
        await killHard(child);
        // As `serve` starts after a crash: restore the snapshot the killed engines left, follow
        // the store to its head; then a replay from zero must hold exactly the same states.
        const snapshot = await readSnapshot(snapshotPath).catch(() => null);
        const runner = createProjectionRunner({ store: reader, logger, snapshot: { path: snapshotPath, everyEvents: 1_000_000 } });
        await runner.start();
        await runner.caughtUp();
        const head = await reader.headPosition();
        await until('the read model to reach the store head', () => runner.readModel.position() === head, 30_000);
        const replayed = await replayStore(reader);
        const differences = compareStates(replayed, runner.readModel.nodes());
        await runner.stop();
        return await tally(engineSigkill, reader, load, recover, {
          notes: [
            `seed ${seed}; ${killed} SIGKILLs, each followed by a restart, and a last one before the check (dwell after restart ${Math.min(...dwellMs)}–${Math.max(...dwellMs)} ms); unacked deliveries were redelivered to each restart and stored once by event id`,
            `read model from ${snapshot === null ? 'zero (no snapshot)' : `the snapshot at position ${snapshot.position}`} followed to position ${head ?? 'none'} vs replay from zero: ${differences.length} difference(s) over ${replayed.size} node(s)${differences.length === 0 ? '' : ` — first: ${JSON.stringify(differences[0])}`}`,
          ],
          checks: {
            killedEveryTime: killed === kills && kills >= 1,
            readModelEqualsReplay: differences.length === 0 && replayed.size === nodes.length,
          },
        });
      } finally {
        await stopGently(child);
        await reader.close();
      }
    }),
};
