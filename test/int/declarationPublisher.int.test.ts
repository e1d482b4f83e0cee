import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { connectAmqp } from '../../src/transport/amqpConnection.ts';
import { createAmqpDeclarationPublisher } from '../../src/transport/amqpDeclarationPublisher.ts';
import { nodeQueueOf } from '../../src/transport/brokerNames.ts';
import { names } from '../../src/transport/brokerNames.ts';
import { meshTopology } from '../../src/transport/topology.ts';
import { createManagementClient, seg } from '../../src/brokerAdmin/managementClient.ts';
import pino from 'pino';
import { createBrokerLab, describeOnBroker } from '../support/broker.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';
import type { BrokerLab } from '../support/broker.ts';

// docs/design.md §1 declarations out: mandatory, on a confirm channel. RabbitMQ answers an unroutable
// mandatory publish with basic.return *and then* basic.ack, so an ack alone does not mean the
// node's inbox holds the message: a returned-then-acked declaration must reject (the relay retries).

describeOnBroker('declaration publisher over RabbitMQ', () => {
  let lab: BrokerLab;
  before(async () => {
    lab = await createBrokerLab('declpub');
  });
  after(async () => {
    await lab.remove();
  });

  test('a declaration returned unroutable then acked rejects, and the retry re-declares the inbox and lands', async () => {
    const conn = await connectAmqp({ url: lab.engineUrl, logger, topology: meshTopology() });
    const publisher = createAmqpDeclarationPublisher(conn, { logger });
    const ch = await conn.createChannel();
    try {
      const d = (digest: string) => ({ node: 'p1', digest, keyId: 'k', body: Buffer.from(`{"n":"${digest}"}`) });
      await publisher.publish(d('a'.repeat(64)));
      assert.equal((await ch.checkQueue(nodeQueueOf('p1'))).messageCount, 1, 'the first send declared the inbox before publishing');
      // An operator deletes the inbox; the publisher still believes it declared it.
      await ch.deleteQueue(nodeQueueOf('p1'));
      await assert.rejects(publisher.publish(d('b'.repeat(64))), /returned unroutable/);
      await publisher.publish(d('b'.repeat(64)));
      assert.equal(
        (await ch.checkQueue(nodeQueueOf('p1'))).messageCount,
        1,
        'the retry re-declared the inbox and the declaration is in it',
      );
    } finally {
      await ch.close().catch(() => undefined);
      await publisher.close();
      await conn.close();
    }
  });

  test('a restarted publisher spends no declaration budget on inboxes that exist, and still declares a missing one', async () => {
    const conn = await connectAmqp({ url: lab.engineUrl, logger, topology: meshTopology() });
    const nodes = Array.from({ length: 20 }, (_, i) => `r${i}`);
    const first = createAmqpDeclarationPublisher(conn, { logger, inboxDeclareRate: 1000 });
    for (const n of nodes) await first.publish(declaration(n, '1'.repeat(64)));
    await first.close();
    // The engine restarted: a new publisher whose bucket holds one token and refills one in 100 s.
    // Twenty existing inboxes must not wait for twenty tokens (at 100 a second, 100,000 nodes wait 17 minutes).
    const restarted = createAmqpDeclarationPublisher(conn, { logger, inboxDeclareRate: 0.01 });
    const ch = await conn.createChannel();
    try {
      let published = 0;
      const all = (async () => {
        for (const n of nodes) {
          await restarted.publish(declaration(n, '2'.repeat(64)));
          published++;
        }
      })();
      await until(`the 20 existing inboxes published to (${published} so far)`, () => published === nodes.length, 60_000);
      await all;
      for (const n of nodes) assert.equal((await ch.checkQueue(nodeQueueOf(n))).messageCount, 1, `${n} holds its latest declaration`);
      // A node never seen takes the one token: its inbox is made and bound before the publish.
      await restarted.publish(declaration('r-new', '3'.repeat(64)));
      assert.equal((await ch.checkQueue(nodeQueueOf('r-new'))).messageCount, 1, 'the new inbox holds its declaration');
    } finally {
      await ch.close().catch(() => undefined);
      await restarted.close();
      await conn.close();
    }
  });

  const declaration = (node: string, digest: string) => ({ node, digest, keyId: 'k', body: Buffer.from(`{"n":"${digest}"}`) });

  /** The queue as the broker's management API shows it: its arguments and type. */
  const queueOnBroker = async (queue: string): Promise<{ arguments: Record<string, unknown>; type: string }> => {
    const admin = createManagementClient({ managementUrl: lab.scratch.managementUrl });
    const res = await admin.request('GET', `/queues/${seg(lab.scratch.vhost)}/${seg(queue)}`);
    assert.equal(res.status, 200, `GET queue ${queue}`);
    return res.body as { arguments: Record<string, unknown>; type: string };
  };

  test('a new inbox is a classic v2 queue that keeps only the latest declaration', async () => {
    const conn = await connectAmqp({ url: lab.engineUrl, logger, topology: meshTopology() });
    const publisher = createAmqpDeclarationPublisher(conn, { logger });
    const ch = await conn.createChannel();
    try {
      await publisher.publish(declaration('k1', '1'.repeat(64)));
      await publisher.publish(declaration('k1', '2'.repeat(64)));
      const q = await queueOnBroker(nodeQueueOf('k1'));
      assert.equal(q.type, 'classic');
      assert.deepEqual(q.arguments, { 'x-queue-type': 'classic', 'x-queue-version': 2, 'x-max-length': 1, 'x-overflow': 'drop-head' });
      assert.equal((await ch.checkQueue(nodeQueueOf('k1'))).messageCount, 1, 'the older declaration was dropped');
      const m = await ch.get(nodeQueueOf('k1'), { noAck: true });
      assert.ok(m !== false);
      assert.equal(m.properties.messageId, '2'.repeat(64), 'the inbox holds the latest');
    } finally {
      await ch.close().catch(() => undefined);
      await publisher.close();
      await conn.close();
    }
  });

  test('an inbox declared in an older form is published to as it is, logged once with CONVERGE_ERR_INBOX_OUTDATED naming the migration', async () => {
    const lines: Record<string, unknown>[] = [];
    const captured = pino({ level: 'warn' }, { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) });
    const conn = await connectAmqp({ url: lab.engineUrl, logger, topology: meshTopology() });
    const ch = await conn.createChannel();
    // What earlier engines declared.
    await ch.assertQueue(nodeQueueOf('old1'), { durable: true, arguments: { 'x-queue-type': 'quorum' } });
    await ch.bindQueue(nodeQueueOf('old1'), names.declarationsExchange, 'old1');
    const publisher = createAmqpDeclarationPublisher(conn, { logger: captured });
    try {
      // The relay publishes to several nodes at once: the refused declaration must not fail the others.
      await Promise.all([
        publisher.publish(declaration('old1', 'a'.repeat(64))),
        publisher.publish(declaration('new1', 'b'.repeat(64))),
        publisher.publish(declaration('new2', 'c'.repeat(64))),
      ]);
      await publisher.publish(declaration('old1', 'd'.repeat(64)));
      assert.equal((await ch.checkQueue(nodeQueueOf('old1'))).messageCount, 2, 'both declarations reached the old inbox');
      assert.equal(lines.filter((l) => /unroutable/.test(String(l['msg']))).length, 0, 'a first send to a missing inbox is not a warning');
      assert.equal((await ch.checkQueue(nodeQueueOf('new1'))).messageCount, 1);
      assert.equal((await ch.checkQueue(nodeQueueOf('new2'))).messageCount, 1);
      assert.equal((await queueOnBroker(nodeQueueOf('old1'))).type, 'quorum', 'the relay does not touch the old inbox');
      // The form is checked behind the publishes (the first publish to an inbox that exists is not held for it).
      const warnedOf = (): Record<string, unknown>[] => lines.filter((l) => l['code'] === 'CONVERGE_ERR_INBOX_OUTDATED');
      await until('the outdated inbox is logged', () => warnedOf().length > 0, 30_000);
      await publisher.publish(declaration('old1', 'e'.repeat(64)));
      const warned = warnedOf();
      assert.equal(warned.length, 1, 'logged once per node');
      assert.equal(warned[0]?.['queue'], nodeQueueOf('old1'));
      assert.match(String(warned[0]?.['msg']), /converge broker migrate-inboxes/);
    } finally {
      await ch.close().catch(() => undefined);
      await publisher.close();
      await conn.close();
    }
  });
});
