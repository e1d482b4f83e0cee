import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { generateSigningKey } from '../../src/core/declaration/index.ts';
import { createIngest } from '../../src/engine/ingest/index.ts';
import { createSimulatedNode } from '../../src/simulation/simulatedNode.ts';
import type { SimulatedNode } from '../../src/simulation/simulatedNode.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import type { AmqpConnection } from '../../src/transport/amqpConnection.ts';
import { connectAmqp } from '../../src/transport/amqpConnection.ts';
import { createAmqpNodeLink } from '../../src/transport/amqpNodeLink.ts';
import { createAmqpTransport } from '../../src/transport/amqpTransport.ts';
import type { AmqpTransport } from '../../src/transport/amqpTransport.ts';
import { createBrokerLab, describeOnBroker, uniqueTag } from '../support/broker.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';
import type { BrokerLab } from '../support/broker.ts';

// docs/design.md §2 "lose nothing": the broker drops every connection (engine's and nodes') twice during
// a 10,000-report ingest; afterwards every report a node got a confirm for is stored exactly once.

const total = 10_000;
const nodesCount = 4;
const window = 100;

describeOnBroker('ingest under connection drops', () => {
  const tag = uniqueTag();
  let lab: BrokerLab;
  let transport: AmqpTransport;
  before(async () => {
    lab = await createBrokerLab('converge-int-drops');
    transport = await createAmqpTransport({ url: lab.engineUrl, logger, prefetch: 500 });
  });
  after(async () => {
    await transport?.close();
    await lab?.remove();
  });

  test('every confirmed report is stored exactly once although the broker closed every connection twice mid-ingest', async () => {
    const store = createMemoryEventStore();
    // A disk that takes its time (a few ms per synced batch), so the drain outlasts the drops, and that
    // the test can hold: appends wait while the connections are closed, so deliveries are certainly in
    // flight (received, not acked) when they drop. Without the hold a loaded machine's slow
    // `rabbitmqctl close_all_connections` (2–5 s) could land after the backlog had drained.
    let held: Promise<void> | null = null;
    const slow: EventStore = {
      ...store,
      append: async (w) => {
        await new Promise((r) => setTimeout(r, 10));
        while (held) await held;
        return store.append(w);
      },
    };
    const ingest = createIngest({ store: slow, source: transport.ingestSource(), logger, batchSize: 100 });
    const key = generateSigningKey();
    const conns: AmqpConnection[] = [];
    const sims: SimulatedNode[] = [];
    for (let i = 0; i < nodesCount; i++) {
      const node = `${tag}-d${i}`;
      const conn = await connectAmqp({ url: await lab.enroll(node), logger, reconnect: { initialDelayMs: 50, maxDelayMs: 1_000 } });
      conns.push(conn);
      sims.push(createSimulatedNode({ link: createAmqpNodeLink(conn, { node, logger }), verifyingKey: key, logger }));
    }
    const publish = (count: number): Promise<unknown> =>
      Promise.all(
        sims.map(async (sim) => {
          let left = count / nodesCount;
          await Promise.all(
            Array.from({ length: window }, async () => {
              while (left > 0) {
                left--;
                await sim.report({ applied: ['web'] });
              }
            }),
          );
        }),
      );
    try {
      // A backlog first, so the drops land while deliveries are in flight, not after the fact.
      await publish(total * 0.6);
      await ingest.start();
      const rest = publish(total * 0.4); // nodes publish through both drops too
      for (const mark of [500, 3_000]) {
        await until(`ingest past ${mark}`, () => ingest.stats().acked >= mark);
        let release = (): void => undefined;
        held = new Promise<void>((r) => (release = r));
        await until('deliveries in flight', () => ingest.stats().pending > 0);
        const generation = transport.connection.generation();
        await lab.closeAllConnections();
        await until('the engine reconnected', () => transport.connection.generation() > generation);
        held = null;
        release();
      }
      await rest;
      const want = new Set(sims.flatMap((s) => s.confirmedReports().map((r) => r.messageId)));
      assert.equal(want.size, total);
      const counts = await until(
        'every confirmed report stored',
        async () => {
          const seen = new Map<string, number>();
          for await (const batch of store.readAll()) {
            for (const e of batch) {
              if (e.type !== 'ReportReceived') continue;
              const id = e.data.transport.messageId ?? '';
              seen.set(id, (seen.get(id) ?? 0) + 1);
            }
          }
          return [...want].every((id) => seen.has(id)) ? seen : null;
        },
        120_000,
      );
      const doubled = [...counts].filter(([, n]) => n !== 1);
      assert.deepEqual(doubled, [], 'no report stored twice');
      assert.equal(counts.size, total, 'nothing stored that no node sent');
      // Proof the drops hit mid-ingest: deliveries unacked on a dropped channel came back
      // (and were stored once: their ids were already there, so the second append skipped them).
      assert.ok(ingest.stats().redelivered > 0, 'some reports were redelivered after a drop');
      assert.ok(ingest.stats().received > total, 'the engine saw more deliveries than reports');
      assert.ok(transport.connection.generation() >= 3, 'the engine reconnected after each drop');
    } finally {
      for (const s of sims) await s.stop();
      for (const c of conns) await c.close();
      await ingest.stop();
    }
  });
});
