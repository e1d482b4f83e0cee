import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import amqp from 'amqplib';
import { createManagementClient, seg } from '../../src/brokerAdmin/managementClient.ts';
import { run } from '../../src/cli/main.ts';
import type { CliIo } from '../../src/cli/io.ts';
import { names, nodeQueueOf } from '../../src/transport/brokerNames.ts';
import { inboxArguments, inboxArgumentsOf } from '../../src/transport/topology.ts';
import { createScratchVhost, describeOnBroker } from '../support/broker.ts';
import type { ScratchVhost } from '../support/broker.ts';

// `converge broker migrate-inboxes` against the real broker, in a scratch vhost:
// inboxes an earlier Converge declared as quorum queues become the current inbox, keeping the
// latest declaration they held; a dry run (the default) changes nothing; a run cut short between
// deleting an old inbox and filling the new one is finished by the next run.

const holdingQueueOf = (node: string): string => `converge.inbox-migration.${node}`;

describeOnBroker('converge broker migrate-inboxes', () => {
  let scratch: ScratchVhost;
  let conn: amqp.ChannelModel;
  before(async () => {
    scratch = await createScratchVhost('migrate-inboxes');
    conn = await amqp.connect(scratch.amqpUrl);
  });
  after(async () => {
    await conn?.close().catch(() => undefined);
    await scratch?.remove();
  });

  async function cli(args: readonly string[]) {
    let stdout = '';
    let stderr = '';
    const io: CliIo = {
      stdout: (t) => void (stdout += t),
      stderr: (t) => void (stderr += t),
      env: { CONVERGE_AMQP_URL: scratch.amqpUrl, CONVERGE_MANAGEMENT_URL: scratch.managementUrl },
      stderrIsTTY: false,
      readStdin: async () => Buffer.alloc(0),
      cwd: process.cwd(),
      interrupted: new Promise(() => {}),
    };
    return { code: await run(args, io), stdout, stderr };
  }

  const queueOnBroker = async (queue: string): Promise<{ arguments: Record<string, unknown>; type: string; messages: number } | null> => {
    const admin = createManagementClient({ managementUrl: scratch.managementUrl });
    const res = await admin.request('GET', `/queues/${seg(scratch.vhost)}/${seg(queue)}`);
    if (res.status === 404) return null;
    assert.equal(res.status, 200);
    return res.body as { arguments: Record<string, unknown>; type: string; messages: number };
  };
  const count = async (queue: string): Promise<number> => {
    const ch = await conn.createChannel();
    try {
      return (await ch.checkQueue(queue)).messageCount;
    } finally {
      await ch.close();
    }
  };
  const declaration = (digest: string): [Buffer, amqp.Options.Publish] => [
    Buffer.from(`{"declaration":"${digest}"}`),
    { persistent: true, contentType: 'application/json', messageId: digest, type: 'declaration', headers: { 'key-id': 'k1' } },
  ];

  test('dry run by default, then --apply moves the latest declaration into an inbox of the current form', async () => {
    const ch = await conn.createConfirmChannel();
    await ch.assertExchange(names.declarationsExchange, 'direct', { durable: true });
    // What earlier engines declared: a quorum inbox, here holding two declarations.
    for (const node of ['m1', 'm2']) {
      await ch.assertQueue(nodeQueueOf(node), { durable: true, arguments: { 'x-queue-type': 'quorum' } });
      await ch.bindQueue(nodeQueueOf(node), names.declarationsExchange, node);
    }
    ch.publish(names.declarationsExchange, 'm1', ...declaration('a'.repeat(64)));
    ch.publish(names.declarationsExchange, 'm1', ...declaration('b'.repeat(64)));
    // An inbox already in the current form, and a queue that is no inbox: neither is touched.
    await ch.assertQueue(nodeQueueOf('m3'), { durable: true, arguments: { ...inboxArguments } });
    await ch.bindQueue(nodeQueueOf('m3'), names.declarationsExchange, 'm3');
    ch.publish(names.declarationsExchange, 'm3', ...declaration('c'.repeat(64)));
    await ch.assertQueue('nodes.audit', { durable: true, arguments: { 'x-queue-type': 'quorum' } });
    await ch.waitForConfirms();
    await ch.close();

    const dry = await cli(['broker', 'migrate-inboxes']);
    assert.equal(dry.code, 0, dry.stderr);
    assert.match(dry.stdout, /2 of 3 inboxes/);
    assert.match(dry.stdout, /dry run/i);
    assert.match(dry.stdout, /--apply/);
    assert.equal((await queueOnBroker(nodeQueueOf('m1')))?.type, 'quorum', 'a dry run changes nothing');
    assert.equal(await count(nodeQueueOf('m1')), 2);
    const explicit = await cli(['broker', 'migrate-inboxes', '--dry-run']);
    assert.equal(explicit.code, 0, explicit.stderr);
    assert.equal((await queueOnBroker(nodeQueueOf('m1')))?.type, 'quorum');

    const applied = await cli(['broker', 'migrate-inboxes', '--apply']);
    assert.equal(applied.code, 0, applied.stderr);
    assert.match(applied.stdout, /\[1\/2\] node\.m1/);
    assert.match(applied.stdout, /\[2\/2\] node\.m2/);
    assert.match(applied.stdout, /migrated 2 inboxes/);
    for (const node of ['m1', 'm2', 'm3']) {
      const q = await queueOnBroker(nodeQueueOf(node));
      assert.equal(q?.type, 'classic', node);
      assert.deepEqual(q?.arguments, inboxArguments, node);
    }
    assert.equal((await queueOnBroker('nodes.audit'))?.type, 'quorum', 'not an inbox: untouched');
    assert.equal(await count(nodeQueueOf('m2')), 0);
    assert.equal(await count(nodeQueueOf('m3')), 1);
    const get = await conn.createChannel();
    const m = await get.get(nodeQueueOf('m1'), { noAck: true });
    assert.ok(m !== false, 'the latest declaration was moved');
    assert.equal(m.properties.messageId, 'b'.repeat(64));
    assert.equal(m.properties.type, 'declaration');
    assert.equal(m.properties.contentType, 'application/json');
    assert.equal(m.properties.deliveryMode, 2);
    assert.deepEqual(m.properties.headers, { 'key-id': 'k1' });
    assert.equal(m.content.toString(), `{"declaration":"${'b'.repeat(64)}"}`);
    assert.equal(await get.get(nodeQueueOf('m1')), false, 'and only the latest');
    // Routed through mesh.declarations: the new inbox is bound.
    const pub = await conn.createConfirmChannel();
    pub.publish(names.declarationsExchange, 'm2', ...declaration('d'.repeat(64)));
    await pub.waitForConfirms();
    await pub.close();
    assert.equal(await count(nodeQueueOf('m2')), 1);
    await get.close();

    const again = await cli(['broker', 'migrate-inboxes', '--apply']);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /0 of 3 inboxes/);
  });

  test('a run cut short after deleting an old inbox is finished by the next run, from the copy it kept', async () => {
    const ch = await conn.createConfirmChannel();
    await ch.assertExchange(names.declarationsExchange, 'direct', { durable: true });
    // The state a run leaves when it dies after copying node.h1's latest declaration aside and
    // deleting node.h1, before declaring the new inbox.
    await ch.assertQueue(holdingQueueOf('h1'), { durable: true });
    ch.sendToQueue(holdingQueueOf('h1'), ...declaration('e'.repeat(64)));
    await ch.waitForConfirms();
    await ch.close();
    const r = await cli(['broker', 'migrate-inboxes', '--apply']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /node\.h1/);
    assert.deepEqual((await queueOnBroker(nodeQueueOf('h1')))?.arguments, inboxArguments);
    assert.equal(await count(nodeQueueOf('h1')), 1);
    assert.equal(await queueOnBroker(holdingQueueOf('h1')), null, 'the copy is removed once moved');
  });

  test('without --amqp it says what it needs and exits 2', async () => {
    let stderr = '';
    const io: CliIo = {
      stdout: () => undefined,
      stderr: (t) => void (stderr += t),
      env: { CONVERGE_MANAGEMENT_URL: scratch.managementUrl },
      stderrIsTTY: false,
      readStdin: async () => Buffer.alloc(0),
      cwd: process.cwd(),
      interrupted: new Promise(() => {}),
    };
    assert.equal(await run(['broker', 'migrate-inboxes'], io), 2);
    assert.match(stderr, /--amqp/);
  });

  test('with --inbox-queue quorum, inboxes become bounded quorum queues', async () => {
    const ch = await conn.createConfirmChannel();
    await ch.assertExchange(names.declarationsExchange, 'direct', { durable: true });
    await ch.assertQueue(nodeQueueOf('q1'), { durable: true, arguments: { 'x-queue-type': 'quorum' } });
    await ch.bindQueue(nodeQueueOf('q1'), names.declarationsExchange, 'q1');
    ch.publish(names.declarationsExchange, 'q1', ...declaration('f'.repeat(64)));
    await ch.waitForConfirms();
    await ch.close();
    const r = await cli(['broker', 'migrate-inboxes', '--apply', '--inbox-queue', 'quorum']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /node\.q1/);
    const q = await queueOnBroker(nodeQueueOf('q1'));
    assert.equal(q?.type, 'quorum');
    assert.deepEqual(q?.arguments, inboxArgumentsOf.quorum);
    assert.equal(await count(nodeQueueOf('q1')), 1);
  });
});
