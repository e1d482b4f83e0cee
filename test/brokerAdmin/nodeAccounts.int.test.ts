import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';
import amqp from 'amqplib';
import type { ChannelModel, ConfirmChannel, Options } from 'amqplib';
import { enrollNode, revokeNode } from '../../src/brokerAdmin/index.ts';
import { run } from '../../src/cli/main.ts';
import { createManagementClient } from '../../src/brokerAdmin/managementClient.ts';
import { isConvergeError } from '../../src/core/errors.ts';
import { createScratchVhost, declareMeshTopology, defaultBroker, describeOnBroker } from '../support/broker.ts';
import type { ScratchVhost } from '../support/broker.ts';

// Real accounts on the real broker (docs/design.md §1): what a node's credentials let it do, asserted by
// the broker's own refusals, with a positive control beside each refusal so none passes vacuously.

type Outcome = { ok: true } | { ok: false; code: number | undefined; message: string };

/** Run one action on a fresh confirm channel; report whether the broker accepted it or closed the channel, and with which code. */
async function attempt(conn: ChannelModel, action: (ch: ConfirmChannel) => Promise<unknown>): Promise<Outcome> {
  const ch = await conn.createConfirmChannel();
  let channelError: (Error & { code?: number }) | undefined;
  ch.on('error', (e: Error & { code?: number }) => {
    channelError = e;
  });
  // Not events.once: it rejects on 'error', which is the outcome being observed here.
  const closed = new Promise<void>((resolve) => ch.once('close', () => resolve()));
  try {
    await action(ch);
    await ch.close();
    return { ok: true };
  } catch (e) {
    await closed;
    const err = channelError ?? (e as Error & { code?: number });
    return { ok: false, code: err.code, message: err.message };
  }
}

const publish = (exchange: string, key: string, body: string, props: Options.Publish) => async (ch: ConfirmChannel) => {
  ch.publish(exchange, key, Buffer.from(body), props);
  await ch.waitForConfirms();
};

describeOnBroker('node broker accounts', () => {
  const tag = randomBytes(3).toString('hex');
  const a = `t${tag}-a`;
  const b = `t${tag}-b`;
  let scratch: ScratchVhost;
  let admin: ChannelModel;
  let passwordA = '';
  let passwordB = '';
  const nodeConns: ChannelModel[] = [];
  const connectAs = async (user: string, password: string): Promise<ChannelModel> => {
    const u = new URL(defaultBroker.amqpUrl);
    const c = await amqp.connect({
      protocol: 'amqp',
      hostname: u.hostname,
      port: Number(u.port || 5672),
      username: user,
      password,
      vhost: scratch.vhost,
    });
    c.on('error', () => undefined); // a forced close is an expected outcome here, not a crash
    nodeConns.push(c);
    return c;
  };
  const options = () => ({ managementUrl: scratch.managementUrl, vhost: scratch.vhost });

  before(async () => {
    scratch = await createScratchVhost('converge-test-accounts');
    admin = await amqp.connect(scratch.amqpUrl);
    admin.on('error', () => undefined);
    const ch = await admin.createChannel();
    await declareMeshTopology(ch, [a, b]);
    await ch.close();
    passwordA = (await enrollNode(a, options())).password;
    passwordB = (await enrollNode(b, options())).password;
  });

  after(async () => {
    for (const c of nodeConns) await c.close().catch(() => undefined);
    await admin?.close().catch(() => undefined);
    for (const id of [a, b]) await revokeNode(id, options()).catch(() => undefined);
    await scratch?.remove();
  });

  /** Next message on mesh.reports. basic.get is refused on a single-active-consumer quorum queue, so consume one and cancel. */
  const takeReport = async (): Promise<amqp.ConsumeMessage> => {
    const ch = await admin.createChannel();
    try {
      const m = await new Promise<amqp.ConsumeMessage>((resolve, reject) => {
        ch.consume('mesh.reports', (msg) => (msg ? resolve(msg) : reject(new Error('consumer cancelled'))), { noAck: true }).catch(reject);
      });
      return m;
    } finally {
      await ch.close();
    }
  };

  test('enroll returns a long random password and permissions scoped to mesh and the node queue', async () => {
    assert.ok(passwordA.length >= 40);
    assert.notEqual(passwordA, passwordB);
    const res = await createManagementClient({ managementUrl: scratch.managementUrl }).request('GET', `/users/${a}/permissions`);
    assert.deepEqual(res.body, [{ user: a, vhost: scratch.vhost, configure: '^$', write: '^mesh$', read: `^node\\.t${tag}\\-a$` }]);
  });

  test('a node publishes a report with its own user_id, and it reaches mesh.reports carrying that user_id', async () => {
    const conn = await connectAs(a, passwordA);
    const r = await attempt(conn, publish('mesh', 'report', `{"node":"${a}"}`, { userId: a, persistent: true }));
    assert.deepEqual(r, { ok: true });
    const m = await takeReport();
    assert.equal(m.properties.userId, a);
    assert.equal(m.content.toString(), `{"node":"${a}"}`);
    assert.deepEqual(await attempt(conn, publish('mesh', 'alive', `{"node":"${a}"}`, { userId: a })), { ok: true });
  });

  test('a node cannot publish as another node: user_id ≠ its user closes the channel with 406', async () => {
    const conn = await connectAs(a, passwordA);
    const r = await attempt(conn, publish('mesh', 'report', `{"node":"${b}"}`, { userId: b }));
    assert.equal(r.ok, false);
    assert.equal(!r.ok && r.code, 406, !r.ok ? r.message : '');
    assert.match(!r.ok ? r.message : '', /PRECONDITION/);
  });

  test('a publish with no user_id is accepted by the broker and arrives without one, so the engine must refuse it', async () => {
    const conn = await connectAs(a, passwordA);
    assert.deepEqual(await attempt(conn, publish('mesh', 'report', `{"node":"${b}"}`, {})), { ok: true });
    const m = await takeReport();
    // The broker cannot stop this: a node may omit user_id and name any node in the body.
    // The engine's ingest rejects it with CONVERGE_ERR_USER_ID_MISSING (docs/design.md §1).
    assert.equal(m.properties.userId, undefined);
  });

  test('a node cannot publish with a routing key other than report or alive (topic permission, 403)', async () => {
    const conn = await connectAs(a, passwordA);
    for (const key of ['declarations', 'report.extra', 'alive2', '', '#']) {
      const r = await attempt(conn, publish('mesh', key, `{"node":"${a}"}`, { userId: a }));
      assert.equal(!r.ok && r.code, 403, `routing key ${JSON.stringify(key)} was accepted`);
      assert.match(!r.ok ? r.message : '', /ACCESS.REFUSED/);
    }
  });

  test('a node cannot publish to mesh.declarations, mesh.dead, amq.topic or the default exchange (403)', async () => {
    const conn = await connectAs(a, passwordA);
    for (const [exchange, key] of [
      ['mesh.declarations', b],
      ['mesh.dead', ''],
      ['amq.topic', 'report'],
      ['', `node.${b}`],
      ['', 'mesh.reports'],
    ] as const) {
      const r = await attempt(conn, publish(exchange, key, `{"node":"${a}"}`, { userId: a }));
      assert.equal(!r.ok && r.code, 403, `publishing to ${JSON.stringify(exchange)} with ${JSON.stringify(key)} was accepted`);
    }
  });

  test("a node reads its own queue and cannot read another node's queue or mesh.reports (403)", async () => {
    const conn = await connectAs(a, passwordA);
    assert.deepEqual(await attempt(conn, (ch) => ch.consume(`node.${a}`, () => undefined)), { ok: true });
    for (const q of [`node.${b}`, 'mesh.reports', 'mesh.alive', 'mesh.dead']) {
      const r = await attempt(conn, (ch) => ch.consume(q, () => undefined));
      assert.equal(!r.ok && r.code, 403, `consuming ${q} was allowed`);
      const g = await attempt(conn, (ch) => ch.get(q));
      assert.equal(!g.ok && g.code, 403, `basic.get on ${q} was allowed`);
    }
  });

  test('a node cannot declare, bind or delete anything (configure ^$)', async () => {
    const conn = await connectAs(a, passwordA);
    const tries: [string, (ch: ConfirmChannel) => Promise<unknown>][] = [
      ['declare a queue', (ch) => ch.assertQueue(`node.${a}.mine`)],
      ['declare a server-named queue', (ch) => ch.assertQueue('', { exclusive: true })],
      ['declare an exchange', (ch) => ch.assertExchange('mesh.mine', 'fanout')],
      ['bind its queue to mesh', (ch) => ch.bindQueue(`node.${a}`, 'mesh', 'report')],
      ['delete its queue', (ch) => ch.deleteQueue(`node.${a}`)],
      ['purge mesh.reports', (ch) => ch.purgeQueue('mesh.reports')],
    ];
    for (const [what, action] of tries) {
      const r = await attempt(conn, action);
      assert.equal(!r.ok && r.code, 403, `a node could ${what}`);
    }
  });

  test('enrolling an existing node is refused unless replace is asked for, which rotates the password', async () => {
    await assert.rejects(enrollNode(b, options()), (e) => isConvergeError(e, 'CONVERGE_ERR_NODE_EXISTS'));
    const rotated = await enrollNode(b, { ...options(), replace: true });
    assert.equal(rotated.replaced, true);
    assert.notEqual(rotated.password, passwordB);
    await assert.rejects(connectAs(b, passwordB), /ACCESS_REFUSED|403/);
    const c = await connectAs(b, rotated.password);
    assert.deepEqual(await attempt(c, publish('mesh', 'alive', `{"node":"${b}"}`, { userId: b })), { ok: true });
    passwordB = rotated.password;
  });

  test("enroll declares the node's inbox before its first send; one in an earlier form is left as it is", async () => {
    const fresh = `t${tag}-inbox`;
    const old = `t${tag}-oldinbox`;
    const ch = await admin.createConfirmChannel();
    const m = createManagementClient({ managementUrl: scratch.managementUrl });
    try {
      const r = await enrollNode(fresh, options());
      assert.deepEqual(r.inbox, { queue: `node.${fresh}`, outcome: 'declared' });
      const q = await m.request('GET', `/queues/${encodeURIComponent(scratch.vhost)}/node.${fresh}`);
      assert.equal(q.status, 200);
      assert.deepEqual((q.body as { arguments: unknown }).arguments, {
        'x-queue-type': 'classic',
        'x-queue-version': 2,
        'x-max-length': 1,
        'x-overflow': 'drop-head',
      });
      // Bound: a declaration published before the node ever connected waits in it.
      ch.publish('mesh.declarations', fresh, Buffer.from('{}'), { mandatory: true, persistent: true });
      await ch.waitForConfirms();
      assert.equal((await ch.checkQueue(`node.${fresh}`)).messageCount, 1);
      // An inbox an earlier Converge made (quorum, unbounded) is not a reason to refuse the enroll.
      await ch.assertQueue(`node.${old}`, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
      const r2 = await enrollNode(old, options());
      assert.equal(r2.inbox?.outcome, 'other-form');
      assert.equal(
        ((await m.request('GET', `/queues/${encodeURIComponent(scratch.vhost)}/node.${old}`)).body as { type: string }).type,
        'quorum',
      );
    } finally {
      await ch.close().catch(() => undefined);
      for (const id of [fresh, old]) await revokeNode(id, options()).catch(() => undefined);
    }
  });

  test('an account with tags (an operator) is never replaced or deleted through node accounts', async () => {
    const name = `t${tag}-operator`;
    const m = createManagementClient({ managementUrl: scratch.managementUrl });
    await m.request('PUT', `/users/${name}`, { password: randomBytes(16).toString('hex'), tags: 'monitoring' });
    try {
      await assert.rejects(enrollNode(name, { ...options(), replace: true }), (e) => isConvergeError(e, 'CONVERGE_ERR_NODE_EXISTS'));
      await assert.rejects(revokeNode(name, options()), (e) => isConvergeError(e, 'CONVERGE_ERR_NODE_EXISTS'));
      assert.equal((await m.request('GET', `/users/${name}`)).status, 200);
    } finally {
      await m.request('DELETE', `/users/${name}`);
    }
  });

  test('invalid ids, a missing vhost, bad admin credentials and an unreachable API fail with codes', async () => {
    await assert.rejects(enrollNode('Node/1', options()), (e) => isConvergeError(e, 'CONVERGE_ERR_NODE_ID_INVALID'));
    await assert.rejects(enrollNode(`t${tag}-c`, { ...options(), vhost: `${scratch.vhost}-missing` }), (e) =>
      isConvergeError(e, 'CONVERGE_ERR_BROKER_ADMIN'),
    );
    const badCreds = new URL(scratch.managementUrl);
    badCreds.username = 'guest';
    badCreds.password = 'wrong';
    await assert.rejects(
      enrollNode(`t${tag}-c`, { ...options(), managementUrl: badCreds.toString() }),
      (e) => isConvergeError(e, 'CONVERGE_ERR_BROKER_ADMIN') && /refused/.test(e.message) && !e.message.includes('wrong'),
    );
    await assert.rejects(enrollNode(`t${tag}-c`, { ...options(), managementUrl: 'http://127.0.0.1:1' }), (e) =>
      isConvergeError(e, 'CONVERGE_ERR_BROKER_ADMIN'),
    );
    // Nothing half-made was left behind by the failures.
    assert.equal((await createManagementClient({ managementUrl: scratch.managementUrl }).request('GET', `/users/t${tag}-c`)).status, 404);
  });

  test('the node command prints the password exactly once and never on stderr', async () => {
    const id = `t${tag}-cli`;
    const out: string[] = [];
    const err: string[] = [];
    const io = {
      stdout: (t: string) => void out.push(...t.split('\n').filter((l) => l !== '')),
      stderr: (t: string) => void err.push(t),
      env: { CONVERGE_MANAGEMENT_URL: scratch.managementUrl },
      stderrIsTTY: false,
      readStdin: async () => Buffer.alloc(0),
      cwd: process.cwd(),
      interrupted: new Promise<void>(() => {}),
    };
    assert.equal(await run(['node', 'enroll', id, '--vhost', scratch.vhost, '--json'], io), 0);
    const printed = JSON.parse(out[0] ?? '{}') as { password?: string; node?: string };
    assert.equal(printed.node, id);
    assert.ok(printed.password && printed.password.length >= 40);
    const c = await connectAs(id, printed.password);
    assert.deepEqual(await attempt(c, publish('mesh', 'alive', `{"node":"${id}"}`, { userId: id })), { ok: true });
    assert.equal(await run(['node', 'revoke', id, '--vhost', scratch.vhost], io), 0);
    assert.equal(out.filter((l) => l.includes(printed.password ?? '')).length, 1);
    assert.deepEqual(err, []);
  });

  test('revoking a node closes its open connection and its password no longer logs in', async () => {
    const conn = await connectAs(a, passwordA);
    const ch = await conn.createChannel();
    await ch.consume(`node.${a}`, () => undefined);
    const closed = new Promise<void>((resolve) => conn.once('close', () => resolve()));
    const r = await revokeNode(a, options());
    assert.equal(r.existed, true);
    await closed; // the test runner's timeout bounds this wait; no wall-clock assertion
    await assert.rejects(connectAs(a, passwordA), /ACCESS_REFUSED|403/);
    assert.deepEqual(await revokeNode(a, options()), { node: a, existed: false, connectionsClosed: 0 });
  });
});
