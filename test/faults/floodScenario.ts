import { join } from 'node:path';
import amqp from 'amqplib';
import { createIngest } from '../../src/engine/ingest/index.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { connectAmqp } from '../../src/transport/amqpConnection.ts';
import { createAmqpIngestSource } from '../../src/transport/amqpIngestSource.ts';
import { meshTopology } from '../../src/transport/topology.ts';
import { encodeReport } from '../../src/core/wire/index.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';
import { readStored, withNodes } from './scenarios.ts';
import type { Scenario, ScenarioResult } from './scenarios.ts';

// One enrolled node turned hostile: it floods mesh.reports at full speed with
// routine reports, reports as wide as the wire allows (10,000 failed resources) and reports past
// that (22,000 keys in ~220 KB, as the issue's body), while two other nodes report at a steady pace.
// The engine's per-node budget sheds what the flooder sends beyond it (mesh.reports dead-letters
// each to mesh.dead, x-death reason `rejected`), and refuses the too-wide bodies with
// CONVERGE_ERR_WIRE_TOO_MANY_ENTRIES. Must hold: every steady report stored exactly once; every
// confirmed flood message either stored once or in mesh.dead once (never both, never neither);
// the flooder's stored share within its budget; nothing too wide stored. Measured, not asserted:
// each steady node's report→stored time, before and during the flood.

const budget = { ratePerSecond: 20, burst: 200 } as const;
const floodSmall = Number(process.env['CONVERGE_FAULT_FLOOD'] ?? 10_000);
const floodWide = 60;
const floodHostile = 60;
const steadyEach = 150;
const steadyPaceMs = 20;

const pct = (xs: readonly number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] ?? Number.NaN;
};

function wideFailed(entries: number, salt: number): Record<string, string> {
  const failed: Record<string, string> = {};
  for (let k = 0; k < entries; k++) failed[`${salt}${k.toString(36)}`] = 'e';
  return failed;
}

/** Publish every body as the flooding node, a window of unconfirmed publishes at a time; resolves with the ids confirmed. */
async function flood(url: string, node: string, bodies: readonly (readonly [string, Buffer])[]): Promise<Set<string>> {
  const conn = await amqp.connect(url);
  const confirmed = new Set<string>();
  try {
    const ch = await conn.createConfirmChannel();
    for (let i = 0; i < bodies.length; i += 256) {
      const window = bodies.slice(i, i + 256);
      await Promise.all(
        window.map(
          ([id, body]) =>
            new Promise<void>((resolve) => {
              ch.publish('mesh', 'report', body, { persistent: true, userId: node, messageId: id }, (err: unknown) => {
                if (err === null || err === undefined) confirmed.add(id);
                resolve();
              });
            }),
        ),
      );
    }
  } finally {
    await conn.close();
  }
  return confirmed;
}

/** Message ids in mesh.dead, with how they got there: our coded copy, or the queue's own dead-lettering. */
async function drainDead(url: string): Promise<Map<string, string>> {
  const conn = await amqp.connect(url);
  const seen = new Map<string, string>();
  try {
    const ch = await conn.createChannel();
    const { messageCount } = await ch.checkQueue('mesh.dead');
    await new Promise<void>((resolve) => {
      let n = 0;
      if (messageCount === 0) resolve();
      void ch.consume(
        'mesh.dead',
        (m) => {
          if (m === null) return;
          const h = m.properties.headers ?? {};
          const how = typeof h['x-converge-error'] === 'string' ? h['x-converge-error'] : `x-death:${String(h['x-first-death-reason'])}`;
          const id = String(m.properties.messageId);
          seen.set(id, seen.has(id) ? 'DUPLICATE' : how);
          if (++n === messageCount) resolve();
        },
        { noAck: true },
      );
    });
  } finally {
    await conn.close();
  }
  return seen;
}

export const hostileNodeFlood: Scenario = {
  name: 'hostile node flood',
  faults: `one enrolled node floods at full speed (${floodSmall} routine reports, ${floodWide} of 10,000 failed resources, ${floodHostile} of 22,000 keys / ~220 KB) beside two steady nodes; budget ${budget.ratePerSecond}/s, burst ${budget.burst}`,
  run: (lab) =>
    withNodes(lab, 'fl', 2, async (steady) => {
      const flooder = `${steady[0]!.node}-flood`;
      const flooderUrl = await lab.enroll(flooder);
      const store = createSqliteEventStore(join(lab.dir, 'flood.db'));
      const connection = await connectAmqp({
        url: lab.engineUrl,
        logger,
        topology: meshTopology(),
        connectionName: 'converge-fault-engine',
      });
      const ingest = createIngest({
        store,
        source: createAmqpIngestSource(connection, { logger }),
        logger,
        retry: { minMs: 50, maxMs: 1000 },
        nodeBudget: budget,
      });
      const sentAt = new Map<string, number>();
      const storedAt = new Map<string, number>();
      const unsubscribe = store.subscribe({
        handler: (events) => {
          for (const e of events)
            if (e.type === 'ReportReceived' && e.data.transport.messageId !== null) storedAt.set(e.data.transport.messageId, Date.now());
        },
      });
      await ingest.start();
      try {
        const steadyConfirmed = new Set<string>();
        let flooding = false;
        const phaseOf = new Map<string, 'quiet' | 'flood'>();
        const steadyLoad = Promise.all(
          steady.map(async (n) => {
            for (let i = 0; i < steadyEach; i++) {
              const id = `${n.node}/${i}`;
              sentAt.set(id, Date.now());
              phaseOf.set(id, flooding ? 'flood' : 'quiet');
              await n.link.publish(
                'report',
                encodeReport({ node: n.node, applied: [`r${i}`], failed: {}, refused: '', carried: [], declared: null }),
                id,
              );
              steadyConfirmed.add(id);
              await new Promise((r) => setTimeout(r, steadyPaceMs));
            }
          }),
        );
        await until('some steady load to flow', () => steadyConfirmed.size >= steadyEach / 2);
        const bodies: (readonly [string, Buffer])[] = [];
        const enc = (over: Partial<Parameters<typeof encodeReport>[0]>): Buffer =>
          encodeReport({ node: flooder, applied: [], failed: {}, refused: '', carried: [], declared: null, ...over });
        for (let i = 0; i < floodSmall; i++) bodies.push([`flood/${i}`, enc({ applied: [`r${i}`] })]);
        const wide = enc({ failed: wideFailed(10_000, 1) });
        const tooWide = enc({ failed: wideFailed(22_000, 2) });
        // Spread through the flood, the first of each at its head, where the budget still lets them be parsed.
        for (let i = floodWide - 1; i >= 0; i--) bodies.splice(Math.floor((i * bodies.length) / floodWide), 0, [`wide/${i}`, wide]);
        for (let i = floodHostile - 1; i >= 0; i--)
          bodies.splice(Math.floor((i * bodies.length) / floodHostile), 0, [`hostile/${i}`, tooWide]);
        flooding = true;
        const floodStarted = Date.now();
        const floodConfirmed = await flood(flooderUrl, flooder, bodies);
        const floodMs = Date.now() - floodStarted;
        flooding = false;
        const drainFrom = Date.now();
        await steadyLoad;
        const recoverMs = await until(
          'every steady report and the flood to be stored or refused',
          () => {
            const st = ingest.stats();
            const settled =
              st.received >= steadyConfirmed.size + floodConfirmed.size && st.received === st.acked + st.deadLettered + st.rateLimited;
            return settled && [...steadyConfirmed].every((id) => storedAt.has(id));
          },
          120_000,
        ).then(
          () => Date.now() - drainFrom,
          () => null,
        );
        const dead = await drainDead(lab.engineUrl);
        const stored = await readStored(store);

        let lost = 0;
        let duplicated = 0;
        let storedSteady = 0;
        for (const id of steadyConfirmed) {
          const n = stored.reports.get(id) ?? 0;
          if (n === 0) lost++;
          else storedSteady++;
          if (n > 1) duplicated += n - 1;
        }
        let floodStored = 0;
        let floodDead = 0;
        let floodBoth = 0;
        let floodNeither = 0;
        for (const id of floodConfirmed) {
          const s = stored.reports.get(id) ?? 0;
          const d = dead.has(id) ? 1 : 0;
          floodStored += s;
          floodDead += d;
          if (s + d > 1 || dead.get(id) === 'DUPLICATE') floodBoth++;
          if (s + d === 0) floodNeither++;
        }
        const hostileAppended = [...stored.reports.keys()].filter((id) => id.startsWith('hostile/')).length;
        const codes = new Map<string, number>();
        for (const how of dead.values()) codes.set(how, (codes.get(how) ?? 0) + 1);
        // The budget in units of a message per started 4 KiB; a generous slack for the clock.
        const elapsedS = floodMs / 1000 + 5;
        const floodUnits = [...stored.reports.keys()]
          .filter((id) => id.startsWith('flood/') || id.startsWith('wide/'))
          .reduce((n, id) => n + (id.startsWith('wide/') ? Math.ceil(wide.length / 4096) : 1), 0);
        const latencies = (phase: 'quiet' | 'flood'): number[] =>
          [...steadyConfirmed]
            .filter((id) => phaseOf.get(id) === phase && storedAt.has(id))
            .map((id) => storedAt.get(id)! - sentAt.get(id)!);
        const quiet = latencies('quiet');
        const during = latencies('flood');
        return {
          scenario: hostileNodeFlood.name,
          faults: hostileNodeFlood.faults,
          sent: steadyEach * steady.length,
          confirmed: steadyConfirmed.size,
          stored: storedSteady,
          lost,
          duplicated,
          hostileTried: floodConfirmed.size,
          hostileAppended,
          recoverMs,
          notes: [
            `flood of ${floodConfirmed.size} confirmed in ${(floodMs / 1000).toFixed(1)} s: ${floodStored} stored (within budget), ${floodDead} in mesh.dead (${[...codes].map(([k, v]) => `${v} ${k}`).join(', ')})`,
            `steady nodes' report→stored p50/p99: ${pct(quiet, 50)}/${pct(quiet, 99)} ms before the flood, ${pct(during, 50)}/${pct(during, 99)} ms during it (${during.length} reports; measured, not asserted)`,
          ],
          checks: {
            everyFloodMessageStoredOrDeadLettered: floodNeither === 0 && floodBoth === 0,
            flooderWithinBudget: floodUnits <= budget.burst + budget.ratePerSecond * elapsedS,
            tooWideRefusedWithCode: (codes.get('CONVERGE_ERR_WIRE_TOO_MANY_ENTRIES') ?? 0) > 0 && hostileAppended === 0,
          },
        } satisfies ScenarioResult;
      } finally {
        await unsubscribe.stop();
        await ingest.stop();
        await connection.close();
        await store.close();
      }
    }),
};
