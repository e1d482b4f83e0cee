import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { connectAmqp } from '../../src/transport/amqpConnection.ts';
import { createAmqpDeclarationPublisher } from '../../src/transport/amqpDeclarationPublisher.ts';
import { nodeQueueOf } from '../../src/transport/brokerNames.ts';
import { meshTopology } from '../../src/transport/topology.ts';
import { createBrokerLab, describeOnBroker } from '../support/broker.ts';
import { logger } from '../support/logger.ts';
import type { BrokerLab } from '../support/broker.ts';

// DESIGN §1 declarations out: mandatory, on a confirm channel. RabbitMQ answers an unroutable
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
});
