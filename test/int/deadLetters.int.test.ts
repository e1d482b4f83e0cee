import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import amqp from 'amqplib';
import type { GetMessage } from 'amqplib';
import { createManagementClient, seg } from '../../src/brokerAdmin/managementClient.ts';
import { createIngest } from '../../src/engine/ingest/index.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { createAmqpTransport } from '../../src/transport/amqpTransport.ts';
import { connectAmqp } from '../../src/transport/amqpConnection.ts';
import { meshTopology } from '../../src/transport/topology.ts';
import { createBrokerLab, describeOnBroker } from '../support/broker.ts';
import type { BrokerLab } from '../support/broker.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';

// mesh.dead: a 10 MiB body was republished into it whole, and nothing bounded
// it. Against the real broker: the copy of an oversized body is a prefix with the original's size
// and sha256, and `serve` bounds the queue by a policy — an existing, fuller mesh.dead included.

const bin = new URL('../../bin/converge.js', import.meta.url).pathname;

describeOnBroker('mesh.dead', () => {
  let lab: BrokerLab;
  before(async () => {
    lab = await createBrokerLab('converge-int-dead');
  });
  after(async () => {
    await lab?.remove();
  });

  test('the dead-letter copy of a 10 MiB body is its first 64 KiB, with its size and sha256 in headers', async () => {
    const node = 'dead-big';
    const transport = await createAmqpTransport({ url: lab.engineUrl, logger });
    const ingest = createIngest({ store: createMemoryEventStore(), source: transport.ingestSource(), logger });
    await ingest.start();
    const conn = await amqp.connect(await lab.enroll(node));
    try {
      const body = Buffer.alloc(10 * 1024 * 1024, 'x');
      body.write('{"node":"dead-big","applied":["', 0);
      const ch = await conn.createConfirmChannel();
      ch.publish('mesh', 'report', body, { persistent: true, userId: node, messageId: 'ten-mib' });
      await ch.waitForConfirms();
      const reader = await transport.connection.createChannel();
      const m = await until('the copy in mesh.dead', async () => (await reader.get('mesh.dead', { noAck: true })) || null);
      const h = (m as GetMessage).properties.headers ?? {};
      assert.equal(h['x-converge-error'], 'CONVERGE_ERR_WIRE_TOO_LARGE');
      assert.equal(m.content.length, 64 * 1024, 'a bounded prefix, not the whole body');
      assert.ok(m.content.equals(body.subarray(0, 64 * 1024)));
      assert.equal(Number(h['x-converge-original-size']), body.length);
      assert.equal(h['x-converge-original-sha256'], createHash('sha256').update(body).digest('hex'));
      await reader.close();
    } finally {
      await conn.close();
      await ingest.stop();
      await transport.close();
    }
  });

  test(
    'serve bounds mesh.dead by a broker policy: past --dead-letter-max-length the oldest go, in a queue that existed before too',
    { timeout: 60_000 },
    async () => {
      // A mesh.dead from before, holding 8 dead letters.
      const pre = await connectAmqp({ url: lab.engineUrl, logger, topology: meshTopology() });
      const ch = await pre.createConfirmChannel();
      const deadLetter = (i: number): void =>
        void ch.publish('mesh.dead', 'report', Buffer.from(`dead ${i}`), { persistent: true, messageId: `d${i}` });
      for (let i = 0; i < 8; i++) deadLetter(i);
      await ch.waitForConfirms();

      const env: NodeJS.ProcessEnv = {
        ...process.env,
        CONVERGE_STORE: `sqlite:${join(lab.dir, 'serve.db')}`,
        CONVERGE_AMQP_URL: lab.engineUrl,
        CONVERGE_MANAGEMENT_URL: lab.scratch.managementUrl,
        CONVERGE_DEAD_LETTER_MAX_LENGTH: '5',
        CONVERGE_LOG_LEVEL: 'warn',
      };
      const child = spawn(process.execPath, [bin, 'serve', '--port', '0'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
      const exited = once(child, 'exit');
      const admin = createManagementClient({ managementUrl: lab.scratch.managementUrl });
      try {
        await until('serve listening', () => /converge serving on/.test(stderr) || (child.exitCode !== null && assert.fail(stderr)));
        const depth = async (): Promise<number> => (await ch.checkQueue('mesh.dead')).messageCount;
        await until('mesh.dead cut to 5', async () => (await depth()) === 5);
        for (let i = 8; i < 11; i++) deadLetter(i);
        await ch.waitForConfirms();
        assert.equal(await depth(), 5, 'still 5 after three more');
        const kept: string[] = [];
        for (let m = await ch.get('mesh.dead', { noAck: true }); m !== false; m = await ch.get('mesh.dead', { noAck: true })) {
          kept.push(String(m.properties.messageId));
        }
        assert.deepEqual(kept, ['d6', 'd7', 'd8', 'd9', 'd10'], 'the newest are kept (drop-head)');
        const policies = (await admin.request('GET', `/operator-policies/${seg(lab.scratch.vhost)}`)).body as { name: string }[];
        assert.ok(
          policies.some((p) => p.name === 'converge-mesh-dead'),
          JSON.stringify(policies),
        );
      } finally {
        child.kill('SIGTERM');
        await exited;
        await pre.close();
      }
    },
  );
});
