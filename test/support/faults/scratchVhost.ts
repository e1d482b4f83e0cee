import { randomBytes } from 'node:crypto';
import amqp from 'amqplib';
import { createManagementClient, seg } from '../../../src/accounts/managementClient.ts';
import { adminError } from '../../../src/accounts/managementClient.ts';

// A fresh RabbitMQ vhost per test or scenario, deleted afterwards, so tests that declare the mesh
// topology never meet queues (or messages) left by another run on the shared broker.

export type BrokerEndpoints = Readonly<{
  /** amqp://user:pass@host:port — without a vhost path. */
  amqpUrl: string;
  managementUrl: string;
}>;

export const defaultBroker: BrokerEndpoints = {
  amqpUrl: process.env['CONVERGE_AMQP_URL'] ?? 'amqp://guest:guest@127.0.0.1:5672',
  managementUrl: process.env['CONVERGE_MANAGEMENT_URL'] ?? 'http://guest:guest@127.0.0.1:15672',
};

/** amqp URL for `vhost`: the vhost is the URL path, percent-encoded (`/` → `%2F`). */
export const amqpUrlFor = (base: string, vhost: string): string => `${base.replace(/\/+$/, '')}/${seg(vhost)}`;

export type ScratchVhost = Readonly<{ vhost: string; amqpUrl: string; managementUrl: string; remove: () => Promise<void> }>;

export async function createScratchVhost(prefix: string, broker: BrokerEndpoints = defaultBroker): Promise<ScratchVhost> {
  const vhost = `${prefix}-${randomBytes(4).toString('hex')}`;
  const admin = createManagementClient({ managementUrl: broker.managementUrl });
  const created = await admin.request('PUT', `/vhosts/${seg(vhost)}`, {});
  if (created.status !== 201 && created.status !== 204) throw adminError('PUT', `/vhosts/${vhost}`, created);
  // The admin user needs rights in the new vhost to declare the topology.
  const adminUser = new URL(broker.amqpUrl).username || 'guest';
  const perm = await admin.request('PUT', `/permissions/${seg(vhost)}/${seg(decodeURIComponent(adminUser))}`, {
    configure: '.*',
    write: '.*',
    read: '.*',
  });
  if (perm.status !== 201 && perm.status !== 204) throw adminError('PUT', `/permissions/${vhost}`, perm);
  return {
    vhost,
    amqpUrl: amqpUrlFor(broker.amqpUrl, vhost),
    managementUrl: broker.managementUrl,
    remove: async () => {
      await admin.request('DELETE', `/vhosts/${seg(vhost)}`);
    },
  };
}

/** Reachability of both the AMQP port and the management API, with the reason when not. */
export async function probeBroker(broker: BrokerEndpoints = defaultBroker): Promise<{ ok: true } | { ok: false; reason: string }> {
  try {
    const conn = await amqp.connect(broker.amqpUrl, { timeout: 3000 });
    await conn.close();
  } catch (e) {
    return { ok: false, reason: `AMQP at ${new URL(broker.amqpUrl).host}: ${(e as Error).message}` };
  }
  try {
    const res = await createManagementClient({ managementUrl: broker.managementUrl, timeoutMs: 3000 }).request('GET', '/overview');
    if (res.status !== 200) return { ok: false, reason: `management API answered HTTP ${res.status}` };
  } catch (e) {
    return { ok: false, reason: (e as Error).message };
  }
  return { ok: true };
}

/**
 * The topology of DESIGN §1, declared as the engine declares it. For tests that must not depend on
 * the transport module's own declaration code (they test the broker's rules, not our code).
 */
export async function declareMeshTopology(ch: amqp.Channel, nodes: readonly string[]): Promise<void> {
  await ch.assertExchange('mesh', 'topic', { durable: true });
  await ch.assertExchange('mesh.declarations', 'direct', { durable: true });
  await ch.assertExchange('mesh.dead', 'fanout', { durable: true });
  await ch.assertQueue('mesh.dead', { durable: true });
  await ch.bindQueue('mesh.dead', 'mesh.dead', '');
  await ch.assertQueue('mesh.reports', {
    durable: true,
    arguments: { 'x-queue-type': 'quorum', 'x-single-active-consumer': true, 'x-dead-letter-exchange': 'mesh.dead' },
  });
  await ch.bindQueue('mesh.reports', 'mesh', 'report');
  await ch.assertQueue('mesh.alive', { durable: true, arguments: { 'x-queue-type': 'quorum', 'x-dead-letter-exchange': 'mesh.dead' } });
  await ch.bindQueue('mesh.alive', 'mesh', 'alive');
  for (const id of nodes) {
    await ch.assertQueue(`node.${id}`, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
    await ch.bindQueue(`node.${id}`, 'mesh.declarations', id);
  }
}
