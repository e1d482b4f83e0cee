import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import amqp from 'amqplib';
import type { ChannelModel } from 'amqplib';
import { generateSigningKey } from '../../src/core/declaration/index.ts';
import { createRelay } from '../../src/engine/relay.ts';
import { createBatchSender } from '../../src/engine/sendBatch.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { createAmqpTransport } from '../../src/transport/amqpTransport.ts';
import type { AmqpTransport } from '../../src/transport/amqpTransport.ts';
import { nodeQueueOf } from '../../src/transport/brokerNames.ts';
import type { DeclarationPublisher } from '../../src/transport/port.ts';
import { createScratchVhost, describeOnBroker, uniqueTag } from '../support/broker.ts';
import type { ScratchVhost } from '../support/broker.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';

// A bulk send to a few hundred nodes never seen, through the real relay and broker: while the relay
// declares their inboxes (at its bounded rate, src/transport/inboxDeclarer.ts), a probe opens new
// AMQP connections in a loop — what a restarted engine or a node coming back does — and every probe
// must connect; every node must receive its declaration. The vhost is this test's own, created and
// deleted through the management API.

const nodes = 300;

describeOnBroker('inbox declaring under a bulk send', () => {
  let scratch: ScratchVhost;
  let transport: AmqpTransport;
  before(async () => {
    scratch = await createScratchVhost('converge-int-inboxes');
    transport = await createAmqpTransport({ url: scratch.amqpUrl, logger });
  });
  after(async () => {
    await transport?.close();
    await scratch?.remove();
  });

  test(`a bulk send to ${nodes} fresh nodes: the broker answers every new handshake meanwhile, and every declaration is delivered`, async () => {
    const tag = uniqueTag();
    const store = createMemoryEventStore();
    const key = generateSigningKey();
    const ids = Array.from({ length: nodes }, (_, i) => `n${tag}-${i}`);
    const sent = await createBatchSender({ store, key }).sendMany(
      ids.map((node) => ({ node, resources: [{ id: 'web', image: `img-${node}` }] })),
    );
    const digests = new Map<string, string>();
    for (const o of sent.outcomes) {
      assert.ok(o.ok, `send to ${o.node}`);
      digests.set(o.node, o.digest);
    }
    // Nodes take their declaration once the relay's publish is confirmed (as a node connected to its inbox would).
    const inner = transport.declarationPublisher();
    const confirmed: string[] = [];
    const publisher: DeclarationPublisher = {
      publish: async (d) => {
        await inner.publish(d);
        confirmed.push(d.node);
      },
      close: () => inner.close(),
    };
    const relay = createRelay({ store, publisher, logger });
    const received = new Map<string, string>();
    const drainers: ChannelModel[] = [];
    let relaying = true;
    const probes = { ok: 0, failed: [] as string[], slowestMs: 0 };
    const probe = async (): Promise<void> => {
      while (relaying) {
        const t0 = performance.now();
        try {
          const c = await amqp.connect(scratch.amqpUrl, { timeout: 15_000 });
          await c.close();
          probes.ok++;
          probes.slowestMs = Math.max(probes.slowestMs, performance.now() - t0);
        } catch (e) {
          probes.failed.push((e as Error).message);
        }
      }
    };
    const drain = async (c: ChannelModel, mine: (i: number) => boolean): Promise<void> => {
      const ch = await c.createChannel();
      let next = 0;
      while (received.size < nodes) {
        const node = confirmed[next];
        if (node === undefined || !mine(next)) {
          if (node !== undefined) next++;
          else await new Promise((r) => setTimeout(r, 5));
          continue;
        }
        next++;
        const m = await ch.get(nodeQueueOf(node), { noAck: true });
        if (m !== false) received.set(node, String(m.properties.messageId));
      }
      await ch.close();
    };
    try {
      for (let i = 0; i < 3; i++) drainers.push(await amqp.connect(scratch.amqpUrl));
      relay.start();
      const probing = probe();
      const draining = Promise.all(drainers.map((c, k) => drain(c, (i) => i % drainers.length === k)));
      await until(`all ${nodes} declarations received (${received.size} so far)`, () => received.size === nodes, 240_000);
      relaying = false;
      await probing;
      await draining;
    } finally {
      relaying = false;
      await relay.stop();
      await publisher.close();
      for (const c of drainers) await c.close().catch(() => undefined);
    }
    for (const [node, digest] of digests) assert.equal(received.get(node), digest, `node ${node} received its declaration`);
    assert.deepEqual(probes.failed, [], 'every probe connected');
    assert.ok(probes.ok > 0, 'the probe ran while the relay declared');
    process.stdout.write(
      `# ${probes.ok} probe handshakes while ${nodes} inboxes were declared, slowest ${Math.round(probes.slowestMs)} ms\n`,
    );
  });
});
