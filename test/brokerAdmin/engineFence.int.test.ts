import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import amqp from 'amqplib';
import type { ChannelModel } from 'amqplib';
import { closeOtherEngineConnections, fenceClient } from '../../src/brokerAdmin/engineFence.ts';
import { createManagementClient, seg } from '../../src/brokerAdmin/managementClient.ts';
import { createScratchVhost, describeOnBroker } from '../support/broker.ts';
import type { ScratchVhost } from '../support/broker.ts';
import { until } from '../support/until.ts';

// The relay's fence on the real broker (docs/operations.md "Fencing the relay"): every other
// engine's connection on the vhost is closed, by its client-provided name, and nothing else is —
// not this engine's own, not a node's, not an engine's on another vhost.

describeOnBroker('closing the other engines’ connections (the relay fence)', () => {
  let vh: ScratchVhost;
  let other: ScratchVhost;
  const open: ChannelModel[] = [];
  before(async () => {
    vh = await createScratchVhost('converge-fence');
    other = await createScratchVhost('converge-fence-other');
  });
  after(async () => {
    for (const c of open) await c.close().catch(() => undefined);
    await vh.remove();
    await other.remove();
  });

  const connect = async (url: string, name: string): Promise<{ conn: ChannelModel; closed: () => boolean }> => {
    const conn = await amqp.connect(url, { clientProperties: { connection_name: name } });
    let closed = false;
    conn.on('close', () => (closed = true));
    conn.on('error', () => undefined);
    open.push(conn);
    return { conn, closed: () => closed };
  };
  const listed = async (vhost: string): Promise<string[]> => {
    const admin = createManagementClient({ managementUrl: vh.managementUrl });
    const r = await admin.request('GET', `/vhosts/${seg(vhost)}/connections`);
    return (r.body as { state?: string; client_properties?: { connection_name?: string } }[])
      .filter((c) => c.state !== 'closed' && c.state !== 'closing')
      .map((c) => c.client_properties?.connection_name ?? '');
  };

  test('closes every other engine (an older release’s plain name too), spares its own, nodes and other vhosts', async () => {
    const own = await connect(vh.amqpUrl, 'converge-engine own1');
    const peer = await connect(vh.amqpUrl, 'converge-engine peer2');
    const older = await connect(vh.amqpUrl, 'converge-engine');
    const node = await connect(vh.amqpUrl, 'node-7');
    const elsewhere = await connect(other.amqpUrl, 'converge-engine far3');
    // The management API lists a connection once the broker has emitted its first stats.
    await until('the broker to list the four connections', async () => (await listed(vh.vhost)).length === 4, 30_000);
    await until('the broker to list the other vhost’s connection', async () => (await listed(other.vhost)).length === 1, 30_000);

    const closed = await closeOtherEngineConnections({
      client: fenceClient(vh.managementUrl),
      vhost: vh.vhost,
      own: 'converge-engine own1',
    });
    assert.equal(closed.length, 2, 'the peer and the older release');
    assert.deepEqual(
      (await listed(vh.vhost)).sort(),
      ['converge-engine own1', 'node-7'],
      'the broker lists the closed ones no more, or as closed',
    );
    await until('the closed connections to hear it', () => peer.closed() && older.closed());
    assert.equal(own.closed(), false, 'its own connection stays');
    assert.equal(node.closed(), false, "a node's connection stays");
    assert.equal(elsewhere.closed(), false, 'an engine on another vhost stays');
  });

  test('with no other engine it closes nothing; an unreachable API is an error, not a silent pass', async () => {
    assert.deepEqual(
      await closeOtherEngineConnections({ client: fenceClient(vh.managementUrl), vhost: vh.vhost, own: 'converge-engine own1' }),
      [],
    );
    await assert.rejects(
      closeOtherEngineConnections({ client: fenceClient('http://127.0.0.1:1'), vhost: vh.vhost, own: 'x' }),
      /CONVERGE_ERR_BROKER_ADMIN|cannot be reached/,
    );
  });
});
