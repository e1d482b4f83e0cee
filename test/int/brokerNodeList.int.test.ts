import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import amqp from 'amqplib';
import { createIngest } from '../../src/engine/ingest/index.ts';
import { isConvergeError } from '../../src/core/errors.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { connectAmqp } from '../../src/transport/amqpConnection.ts';
import { createAmqpTransport } from '../../src/transport/amqpTransport.ts';
import { meshTopology } from '../../src/transport/topology.ts';
import { createBrokerLab, describeOnBroker } from '../support/broker.ts';
import type { BrokerLab } from '../support/broker.ts';
import { logger } from '../support/logger.ts';
import { sleep, until } from '../support/until.ts';

// What the engine does with a list of broker nodes and with a dead-letter queue it cannot use
//, against the local broker: the failover itself needs a cluster and lives in
// test/faults/clusterFailover.fault.test.ts.

/** A port that refuses connections, standing for a cluster node that is down. */
async function deadPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

describeOnBroker('broker node lists and mesh.dead', () => {
  let lab: BrokerLab;
  before(async () => {
    lab = await createBrokerLab('converge-int-nodelist');
  });
  after(async () => {
    await lab?.remove();
  });

  test('a list whose first node is down starts on the next one, and comes back to it after the broker drops the connection', async () => {
    const down = new URL(lab.engineUrl);
    down.port = String(await deadPort());
    const conn = await connectAmqp({ url: `${down.toString()},${lab.engineUrl}`, logger, topology: meshTopology(), heartbeatSeconds: 2 });
    try {
      assert.equal(new URL(conn.connectedTo() ?? '').port, new URL(lab.engineUrl).port || '5672');
      assert.equal(conn.generation(), 1);
      await until('the engine connection to be listed by the broker', async () => (await lab.closeAllConnections()) > 0, 15_000);
      // At least one reconnection: under load the broker may drop it again, and a later generation
      // came back through the list just as well. What matters is a working connection after it.
      await until('the connection to come back through the list', () => conn.isConnected() && conn.generation() >= 2, 15_000);
      const ch = await conn.createChannel();
      await ch.checkQueue('mesh.reports');
      await ch.close();
    } finally {
      await conn.close();
    }
  });

  test('a mesh.dead left classic by an earlier version is accepted; any other difference is still a conflict', async () => {
    const raw = await amqp.connect(lab.engineUrl);
    const ch = await raw.createChannel();
    await ch.deleteQueue('mesh.dead');
    await ch.assertQueue('mesh.dead', { durable: true });
    await raw.close();
    const conn = await connectAmqp({ url: lab.engineUrl, logger, topology: meshTopology() });
    await conn.close();
    await assert.rejects(connectAmqp({ url: lab.engineUrl, logger, topology: meshTopology({ deliveryLimit: 9 }) }), (e: unknown) =>
      isConvergeError(e, 'CONVERGE_ERR_TOPOLOGY_CONFLICT'),
    );
  });

  test('a refused message stays unacked while mesh.dead cannot take it, and lands there once it can', async () => {
    const transport = await createAmqpTransport({ url: lab.engineUrl, logger });
    const store = createMemoryEventStore();
    const ingest = createIngest({ store, source: transport.ingestSource(), logger, retry: { minMs: 50, maxMs: 200 } });
    await ingest.start();
    const raw = await amqp.connect(lab.engineUrl);
    try {
      const ch = await raw.createConfirmChannel();
      await ch.deleteQueue('mesh.dead');
      // No user_id: refused (CONVERGE_ERR_USER_ID_MISSING), so it must go to mesh.dead.
      ch.publish('mesh', 'report', Buffer.from(JSON.stringify({ node: 'n1' })), { persistent: true, messageId: 'orphan' });
      await ch.waitForConfirms();
      await until('ingest to try to dead-letter it', () => ingest.stats().received >= 1, 15_000);
      await sleep(500);
      assert.equal(ingest.stats().deadLettered, 0, 'no dead letter can have been confirmed: mesh.dead does not exist');
      assert.equal(ingest.stats().acked, 0, 'the refused report is still held unacked, not dropped');
      await ch.assertQueue('mesh.dead', { durable: true, arguments: { 'x-queue-type': 'quorum' } });
      await ch.bindQueue('mesh.dead', 'mesh.dead', '');
      await until('the dead letter to land in mesh.dead', () => ingest.stats().deadLettered === 1, 15_000);
      const m = await ch.get('mesh.dead', { noAck: true });
      assert.ok(m !== false);
      assert.equal(m.properties.messageId, 'orphan');
      assert.equal(m.properties.headers?.['x-converge-error'], 'CONVERGE_ERR_USER_ID_MISSING');
    } finally {
      await raw.close();
      await ingest.stop();
      await transport.close();
    }
  });
});
