import { join } from 'node:path';
import fc from 'fast-check';
import { hostileBodies } from '../support/faults/hostileBodies.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { encodeReport } from '../../src/core/wire/index.ts';
import { until } from '../support/until.ts';
import { startEngine } from './faultScenario.ts';
import type { Scenario } from './faultScenario.ts';
import { publishUntilConfirmed, startLoad, PER_NODE, PACE_MS, withNodes } from './faultNodes.ts';
import type { NodeConn } from './faultNodes.ts';
import { readStored, timeToStore, tally } from './faultTally.ts';

// Hostile bodies published over the broker beside honest load: none becomes an event.

export const hostileOverBroker: Scenario = {
  name: 'hostile input over the broker',
  faults: 'hostile bodies (fast-check), reports with no user_id, and reports naming another node, mixed with valid load',
  run: (lab) =>
    withNodes(lab, 'hx', 2, async (nodes) => {
      const [a, b] = nodes as [NodeConn, NodeConn];
      const store = createSqliteEventStore(join(lab.dir, 'hostile.db'));
      const engine = await startEngine(lab.engineUrl, store);
      const noUserId = a.raw(null);
      try {
        const load = startLoad([a, b], PER_NODE / 2, PACE_MS);
        const hostile = fc.sample(
          hostileBodies().filter((h) => h.mustReject),
          { numRuns: 300, seed: 7 },
        );
        let tried = 0;
        const stop = () => false;
        for (const [i, h] of hostile.entries()) {
          tried++;
          await publishUntilConfirmed(a.link, h.message, h.body, `hostile/${i}`, stop);
        }
        // Valid bodies the engine must still refuse: no user_id (the broker lets it through), and
        // a body naming node b sent by node a (user_id a).
        for (let i = 0; i < 25; i++) {
          tried += 2;
          await publishUntilConfirmed(
            noUserId,
            'report',
            encodeReport({ node: a.node, applied: [], failed: {}, refused: '', carried: [], declared: null }),
            `hostile/nouser/${i}`,
            stop,
          );
          await publishUntilConfirmed(
            a.link,
            'report',
            encodeReport({ node: b.node, applied: [], failed: {}, refused: '', carried: [], declared: null }),
            `hostile/mismatch/${i}`,
            stop,
          );
        }
        await load.done;
        const recover = await timeToStore(() => store, load.confirmed());
        await until('every hostile message to be dead-lettered', () => engine.ingest.stats().deadLettered >= tried, 60_000).catch(
          () => undefined,
        );
        const stored = await readStored(store);
        const legit = new Set([a, b].map((n) => `node-${n.node}`));
        let hostileAppended = 0;
        for (const [id, n] of stored.reports) if (id.startsWith('hostile/')) hostileAppended += n;
        for (const [stream, n] of stored.reportsByStream) if (!legit.has(stream)) hostileAppended += n;
        // The valid load sends no alive, so any AliveSeen came from a hostile body.
        for (const n of stored.aliveByStream.values()) hostileAppended += n;
        const deadLettered = engine.ingest.stats().deadLettered;
        return await tally(hostileOverBroker, store, load, recover, {
          hostileTried: tried,
          hostileAppended,
          notes: [`${deadLettered} dead-lettered to mesh.dead with a code`],
          checks: { everyHostileMessageDeadLettered: deadLettered === tried },
        });
      } finally {
        await noUserId.close().catch(() => undefined);
        await engine.stop();
        await store.close();
      }
    }),
};
