import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import amqp from 'amqplib';
import type { ChannelModel, GetMessage } from 'amqplib';
import { generateSigningKey } from '../../src/core/declaration/index.ts';
import { createIngest } from '../../src/engine/ingest/index.ts';
import { createMetrics } from '../../src/metrics.ts';
import { createRelay } from '../../src/engine/relay.ts';
import { createSender } from '../../src/engine/send.ts';
import { isConvergeError } from '../../src/core/errors.ts';
import { createFaultProxy } from '../support/faults/faultProxy.ts';
import { streamOf } from '../../src/core/events/index.ts';
import { createSimulatedNode } from '../../src/simulation/simulatedNode.ts';
import { loadConfig } from '../../src/app/config.ts';
import { createServer } from '../../src/app/server.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { connectAmqp } from '../../src/transport/amqpConnection.ts';
import { createAmqpNodeLink } from '../../src/transport/amqpNodeLink.ts';
import { createAmqpTransport } from '../../src/transport/amqpTransport.ts';
import type { AmqpTransport } from '../../src/transport/amqpTransport.ts';
import { meshTopology } from '../../src/transport/topology.ts';
import { encodeReport } from '../../src/core/wire/index.ts';
import { foldNodeEvents } from '../../projections/index.ts';
import type { NodeState } from '../../projections/index.ts';
import { createBrokerLab, describeOnBroker, uniqueTag } from '../support/broker.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';
import type { BrokerLab } from '../support/broker.ts';

// The engine over a real RabbitMQ (docs/design.md §1), one scratch vhost for this file.

const fold = async (store: EventStore, node: string): Promise<NodeState> => foldNodeEvents(node, await store.readStream(streamOf(node)));
const report = (node: string, over: Partial<Parameters<typeof encodeReport>[0]> = {}): Buffer =>
  encodeReport({ node, applied: [], failed: {}, refused: '', carried: [], declared: null, ...over });

describeOnBroker('engine over RabbitMQ', () => {
  const tag = uniqueTag();
  let lab: BrokerLab;
  let transport: AmqpTransport;
  before(async () => {
    lab = await createBrokerLab('converge-int-engine');
    transport = await createAmqpTransport({ url: lab.engineUrl, logger, heartbeatSeconds: 5 });
  });
  after(async () => {
    await transport?.close();
    await lab?.remove();
  });

  test('asserting the topology twice is a no-op; a queue declared differently is a startup error naming it', async () => {
    const again = await connectAmqp({ url: lab.engineUrl, logger, topology: meshTopology() });
    await again.close();
    await assert.rejects(connectAmqp({ url: lab.engineUrl, logger, topology: meshTopology({ deliveryLimit: 7 }) }), (e: unknown) => {
      assert.ok(isConvergeError(e, 'CONVERGE_ERR_TOPOLOGY_CONFLICT'), String(e));
      assert.match(e.message, /mesh\.reports/);
      return true;
    });
  });

  test("a report for A that lands after B was sent leaves the node behind (stale); B's report converges it", async () => {
    const node = `${tag}-race`;
    const store = createMemoryEventStore();
    const key = generateSigningKey();
    const ingest = createIngest({ store, source: transport.ingestSource(), logger });
    const relay = createRelay({ store, publisher: transport.declarationPublisher(), logger });
    const sender = createSender({ store, key });
    await ingest.start();
    relay.start();
    const nodeConn = await connectAmqp({ url: await lab.enroll(node), logger });
    const sim = createSimulatedNode({
      link: createAmqpNodeLink(nodeConn, { node, logger }),
      verifyingKey: key,
      logger,
      applyDelayMs: 800,
    });
    try {
      const a = await sender.send(node, [{ id: 'web', image: 'web:1' }]);
      const started = sim.start();
      await until('the node to take A', () => started.then(() => sim.applied().length === 0));
      const b = await sender.send(node, [{ id: 'web', image: 'web:2' }]);
      const afterA = await until("A's report stored", async () => {
        const s = await fold(store, node);
        return s.reported?.declared === a.digest ? s : null;
      });
      assert.equal(afterA.sent?.digest, b.digest, "B was sent before A's report was folded");
      assert.equal(afterA.status, 'behind');
      assert.equal(afterA.caughtUp, false);
      assert.equal(afterA.reported?.class, 'stale');
      const afterB = await until("B's report stored", async () => {
        const s = await fold(store, node);
        return s.reported?.declared === b.digest ? s : null;
      });
      assert.equal(afterB.status, 'converged');
      assert.equal(afterB.anomalies.stale, 1);
      assert.equal(sim.badSignatures(), 0);
      const stored = await store.readStream(streamOf(node));
      assert.equal(
        stored.filter((e) => e.type === 'ReportReceived' && e.data.transport.userId === node).length,
        2,
        'user_id recorded as validated by the broker',
      );
    } finally {
      await sim.stop();
      await nodeConn.close();
      await relay.stop();
      await ingest.stop();
    }
  });

  test('poison and hostile messages end in mesh.dead with a reason header, are never stored, and ingest goes on', async () => {
    const n1 = `${tag}-p1`;
    const n2 = `${tag}-p2`;
    const store = createMemoryEventStore();
    const metrics = createMetrics();
    const ingest = createIngest({ store, source: transport.ingestSource(), logger, metrics, limits: { maxBytes: 64 * 1024 } });
    await ingest.start();
    const nodeUrl = await lab.enroll(n1);
    const node: ChannelModel = await amqp.connect(nodeUrl);
    const guest: ChannelModel = await amqp.connect(lab.engineUrl);
    try {
      const ch = await node.createConfirmChannel();
      const pub = (body: Buffer, id: string, userId: string | null = n1, key = 'report'): void => {
        ch.publish('mesh', key, body, { persistent: true, messageId: id, ...(userId === null ? {} : { userId }) });
      };
      pub(Buffer.from('{"node": "'), 'not-json');
      pub(Buffer.from(JSON.stringify({ node: n1, applied: 'web' })), 'wrong-type');
      pub(Buffer.from(JSON.stringify({ node: n1, carried: [1.5] })), 'fractional-port');
      pub(Buffer.from(JSON.stringify({ node: n1, carried: [80, -5] })), 'negative-port');
      pub(Buffer.from(JSON.stringify({ node: n1, carried: [0] })), 'port-zero');
      // Wider than any declaration (10,000 resources), refused before it is parsed.
      pub(Buffer.from(JSON.stringify({ node: n1, applied: Array.from({ length: 10_001 }, () => 'a') })), 'too-wide');
      pub(Buffer.from(JSON.stringify({ applied: ['x'] })), 'no-node');
      pub(Buffer.alloc(70 * 1024, 0x20), 'oversize');
      pub(report(n1, { declared: 'A'.repeat(64) }), 'bad-digest');
      pub(report(n2), 'mismatch'); // body names another node than the broker-validated sender
      pub(Buffer.from(JSON.stringify({ node: 7 })), 'alive-wrong-type', n1, 'alive');
      await ch.waitForConfirms();
      const gch = await guest.createConfirmChannel();
      gch.publish('mesh', 'report', report(n1), { persistent: true, messageId: 'no-user-id' });
      await gch.waitForConfirms();
      pub(report(n1, { applied: ['ok'] }), 'good');
      await ch.waitForConfirms();

      const expected: Record<string, string> = {
        'not-json': 'CONVERGE_ERR_WIRE_NOT_JSON',
        'wrong-type': 'CONVERGE_ERR_WIRE_SCHEMA',
        'fractional-port': 'CONVERGE_ERR_WIRE_SCHEMA',
        'negative-port': 'CONVERGE_ERR_WIRE_SCHEMA',
        'port-zero': 'CONVERGE_ERR_WIRE_SCHEMA',
        'too-wide': 'CONVERGE_ERR_WIRE_TOO_MANY_ENTRIES',
        'no-node': 'CONVERGE_ERR_WIRE_NODE_MISSING',
        oversize: 'CONVERGE_ERR_WIRE_TOO_LARGE',
        'bad-digest': 'CONVERGE_ERR_WIRE_DIGEST',
        mismatch: 'CONVERGE_ERR_USER_ID_MISMATCH',
        'alive-wrong-type': 'CONVERGE_ERR_WIRE_SCHEMA',
        'no-user-id': 'CONVERGE_ERR_USER_ID_MISSING',
      };
      const dead = new Map<string, GetMessage>();
      await until('every hostile message in mesh.dead', async () => {
        for (;;) {
          const m = await gch.get('mesh.dead', { noAck: true });
          if (m === false) break;
          dead.set(String(m.properties.messageId), m);
        }
        return dead.size >= Object.keys(expected).length;
      });
      for (const [id, code] of Object.entries(expected)) {
        const m = dead.get(id);
        assert.ok(m, `${id} dead-lettered`);
        assert.equal(m.properties.headers?.['x-converge-error'], code, id);
        assert.ok(String(m.properties.headers?.['x-converge-reason'] ?? '').length > 0, `${id} has a reason`);
      }
      assert.equal(dead.get('mismatch')?.properties.headers?.['x-converge-user-id'], n1);
      const good = await until('the good report stored', async () => {
        const events = await store.readStream(streamOf(n1));
        return events.length > 0 ? events : null;
      });
      assert.deepEqual(
        good.map((e) => (e.type === 'ReportReceived' ? e.data.transport.messageId : e.type)),
        ['good'],
      );
      assert.deepEqual(await store.readStream(streamOf(n2)), []);
      const rejected = await metrics.registry.getSingleMetric('converge_ingest_rejected_total')?.get();
      assert.equal(
        rejected?.values.reduce((n, v) => n + v.value, 0),
        Object.keys(expected).length,
      );
    } finally {
      await node.close();
      await guest.close();
      await ingest.stop();
    }
  });

  test('a failed resource named __proto__ is stored, folded and served over HTTP exactly as the node sent it', async () => {
    const node = `${tag}-proto`;
    const dir = mkdtempSync(join(tmpdir(), 'converge-int-proto-'));
    const store = createSqliteEventStore(join(dir, 'events.db'));
    const config = loadConfig({ flags: {}, env: {} }, { store: `sqlite:${join(dir, 'events.db')}`, port: '0' });
    const server = createServer({
      config,
      logger,
      store,
      transport: { ingestSource: transport.ingestSource(), publisher: transport.declarationPublisher() },
    });
    await server.start();
    const conn = await connectAmqp({ url: await lab.enroll(node), logger });
    const link = createAmqpNodeLink(conn, { node, logger });
    try {
      const body = Buffer.from(`{"node":"${node}","failed":{"__proto__":"pull denied","web":"port busy"}}`);
      await link.publish('report', body, 'proto-1');
      const st = await until('the report folded', () => server.runner.readModel.get(node)?.reported ?? null);
      assert.deepEqual(Object.entries(st.failed), [
        ['__proto__', 'pull denied'],
        ['web', 'port busy'],
      ]);
      // The report, after the NodeHeard that records the node heard for the first time.
      const stored = (await store.readStream(streamOf(node))).find((e) => e.type === 'ReportReceived');
      assert.ok(stored?.type === 'ReportReceived');
      assert.deepEqual(Object.keys(stored.data.failed), ['__proto__', 'web'], 'read back from SQLite with both keys');
      const res = await server.app.inject({ method: 'GET', url: `/v1/nodes/${node}` });
      assert.equal(res.statusCode, 200);
      assert.match(res.body, /"failed":\{"__proto__":"pull denied","web":"port busy"\}/);
    } finally {
      await link.close();
      await conn.close();
      await server.stop();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a publish whose connection dies before the confirm is re-published from the checkpoint and arrives', async () => {
    const node = `${tag}-relay`;
    const store = createMemoryEventStore();
    const key = generateSigningKey();
    const sender = createSender({ store, key });
    // The relay on its own connection, through a proxy we can cut.
    const base = new URL(lab.engineUrl);
    const proxy = await createFaultProxy({ target: { host: base.hostname, port: Number(base.port || 5672) } });
    const relayConn = await createAmqpTransport({ url: proxy.rewrite(lab.engineUrl), logger, connectionName: 'relay-under-test' });
    const real = relayConn.declarationPublisher();
    const nodeConn = await connectAmqp({ url: await lab.enroll(node), logger });
    const sim = createSimulatedNode({ link: createAmqpNodeLink(nodeConn, { node, logger }), verifyingKey: key, logger, silent: true });
    let attempts = 0;
    let firstFailed = false;
    const publisher = {
      publish: async (d: Parameters<typeof real.publish>[0]) => {
        if (attempts++ > 0) return real.publish(d);
        // The publish leaves, no confirm can come back (blackhole), then the connection dies (RST).
        proxy.blackhole();
        const pending = real.publish(d);
        setTimeout(() => {
          proxy.reset();
          proxy.pass();
        }, 300);
        await pending.catch((e: unknown) => {
          firstFailed = true;
          throw e;
        });
      },
      close: () => real.close(),
    };
    const relay = createRelay({ store, publisher, logger });
    try {
      // Warm the relay channel up (declares node.<id>) so the cut lands on the publish itself.
      const warm = await sender.send(node, [{ id: 'warm-up' }]);
      await real.publish({ node, digest: warm.digest, keyId: key.keyId, body: Buffer.from('{}') });
      await store.setCheckpoint('relay', warm.position ?? 0n);
      const sent = await sender.send(node, [{ id: 'db' }]);
      relay.start();
      await sim.start();
      await until('the declaration at the node', () => sim.applied().includes(sent.digest));
      assert.equal(firstFailed, true, 'the first publish was never confirmed');
      assert.ok(attempts >= 2, 'and was published again');
      await until('the checkpoint past the declaration', async () => (await store.getCheckpoint('relay')) === sent.position);
    } finally {
      await relay.stop();
      await sim.stop();
      await nodeConn.close();
      await publisher.close();
      await relayConn.close();
      await proxy.close();
    }
  });
});
