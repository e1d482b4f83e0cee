import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connectAmqp } from '../../src/transport/amqpConnection.ts';
import type { AmqpConnection } from '../../src/transport/amqpConnection.ts';
import { createAmqpIngestSource } from '../../src/transport/amqpIngestSource.ts';
import { createScratchVhost, describeOnBroker, uniqueTag } from '../support/broker.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';

// docs/design.md §3 "Liveness as recorded": the engine's span starts when ingest first consumes, so
// the AMQP source tells 'consuming' for its first successful consumer setup too, and nothing while
// setup keeps failing at start (here its queues do not exist yet: the broker refuses each consume).

describeOnBroker('the AMQP ingest source at start', () => {
  test('consumer setup failing: nothing told; the first setup that consumes: consuming, once', async (t) => {
    const scratch = await createScratchVhost('firstconsume');
    const cleanups: (() => Promise<void>)[] = [() => scratch.remove()];
    // Last in, first out: the source stops before its connection closes and its vhost goes.
    t.after(async () => {
      for (const cleanup of cleanups.reverse()) await cleanup();
    });
    const conn = await connectAmqp({ url: scratch.amqpUrl, logger });
    cleanups.push(() => conn.close());
    let opened = 0;
    const counted: AmqpConnection = {
      ...conn,
      createChannel: () => {
        opened++;
        return conn.createChannel();
      },
    };
    const tag = uniqueTag();
    const queues = { report: `fc.reports.${tag}`, alive: `fc.alive.${tag}` };
    const source = createAmqpIngestSource(counted, { logger, queues });
    cleanups.push(() => source.stop());
    const links: string[] = [];
    let started = false;
    void source
      .start(
        () => undefined,
        (link) => links.push(link),
      )
      .then(
        () => (started = true),
        () => undefined,
      );

    await until('consumer setup failed twice', () => opened >= 3);
    assert.deepEqual([...links], [], 'not consuming: nothing told');
    assert.equal(started, false);

    const ch = await conn.createChannel();
    for (const q of Object.values(queues)) await ch.assertQueue(q, { durable: false, autoDelete: false });
    await ch.close();
    await until('consuming', () => started);
    assert.deepEqual([...links], ['consuming'], 'the first consuming told, before start resolved');
  });
});
