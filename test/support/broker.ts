import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import amqp from 'amqplib';
import { enrollNode } from '../../src/brokerAdmin/index.ts';
import { createManagementClient, seg } from '../../src/brokerAdmin/managementClient.ts';
import { adminError } from '../../src/brokerAdmin/managementClient.ts';
import { describeOnService, once, probeWithRetries } from './services.ts';

// What every test against the real broker needs (test/int, test/faults, test/brokerAdmin, bench/ingest):
// - describeOnBroker: the suite runs if RabbitMQ (AMQP and the management API) answers; else it
//   fails under CONVERGE_REQUIRE_BROKER=1 and skips loudly otherwise (test/support/services.ts);
// - a scratch vhost per suite or scenario, deleted afterwards, so docs/design.md §1's names stay exact and
//   no run meets queues (or messages) left by another on the shared broker;
// - a broker lab: a scratch vhost, real node accounts (so RabbitMQ validates user_id as in
//   production), a temp dir, and the broker closing every connection on demand.

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

export type ProbeOptions = Readonly<{
  /** Handshakes tried before the broker counts as unreachable. */
  attempts?: number;
  /** Each handshake's bound (ms). */
  timeoutMs?: number;
}>;

/**
 * Reachability of both the AMQP port and the management API, with the reason when not. A loaded
 * machine (CI's parallel group, a broker busy with another suite) can hold one handshake past its
 * bound; a second try then decides, so one slow handshake does not fail every broker suite.
 */
export async function probeBroker(
  broker: BrokerEndpoints = defaultBroker,
  options: ProbeOptions = {},
): Promise<{ ok: true } | { ok: false; reason: string }> {
  const attempts = Math.max(1, options.attempts ?? 4);
  const timeoutMs = options.timeoutMs ?? 5_000;
  const handshake = await probeWithRetries(attempts, async () => {
    try {
      const conn = await amqp.connect(broker.amqpUrl, { timeout: timeoutMs });
      await conn.close();
      return { ok: true };
    } catch (e) {
      return { ok: false, reason: (e as Error).message };
    }
  });
  if (!handshake.ok)
    return { ok: false, reason: `AMQP at ${new URL(broker.amqpUrl).host}: ${handshake.reason} (${attempts} attempts of ${timeoutMs} ms)` };
  try {
    const res = await createManagementClient({ managementUrl: broker.managementUrl, timeoutMs }).request('GET', '/overview');
    if (res.status !== 200) return { ok: false, reason: `management API answered HTTP ${res.status}` };
  } catch (e) {
    return { ok: false, reason: (e as Error).message };
  }
  return { ok: true };
}

const probeOnce = once(() => probeBroker());

/** `describe(name, body)` on a reachable RabbitMQ; see the top of this file for when it is not. */
export function describeOnBroker(name: string, body: () => void | Promise<void>): void {
  describeOnService('RabbitMQ', probeOnce, name, body);
}

/** A short random tag for node ids and queue names, so runs on the shared broker never collide. */
export const uniqueTag = (): string => randomBytes(3).toString('hex');

/**
 * The topology of docs/design.md §1, declared as the engine declares it. For tests that must not depend on
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
    // The inbox the relay declares (src/transport/topology.ts inboxArguments).
    await ch.assertQueue(`node.${id}`, {
      durable: true,
      arguments: { 'x-queue-type': 'classic', 'x-queue-version': 2, 'x-max-length': 1, 'x-overflow': 'drop-head' },
    });
    await ch.bindQueue(`node.${id}`, 'mesh.declarations', id);
  }
}

export type BrokerLab = Readonly<{
  scratch: ScratchVhost;
  /** The engine's URL (admin user, the scratch vhost). */
  engineUrl: string;
  /** A temp dir for stores and snapshots, removed with the lab. */
  dir: string;
  /** Enroll a node account; returns its amqp URL. */
  enroll: (node: string) => Promise<string>;
  /** `rabbitmqctl close_all_connections -p <vhost>`: every connection in this vhost, engine and nodes; returns how many. */
  closeAllConnections: () => Promise<number>;
  remove: () => Promise<void>;
}>;

export async function createBrokerLab(prefix: string): Promise<BrokerLab> {
  const scratch = await createScratchVhost(prefix);
  const admin = createManagementClient({ managementUrl: scratch.managementUrl });
  const enrolled: string[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'converge-lab-'));
  return {
    scratch,
    engineUrl: scratch.amqpUrl,
    dir,
    enroll: async (node) => {
      const e = await enrollNode(node, { managementUrl: scratch.managementUrl, vhost: scratch.vhost });
      enrolled.push(node);
      const base = new URL(defaultBroker.amqpUrl);
      return `amqp://${seg(node)}:${seg(e.password)}@${base.host}/${seg(scratch.vhost)}`;
    },
    closeAllConnections: async () => {
      // rabbitmqctl acts on the broker's live connection table; the management API's list comes
      // from statistics that lag new connections by seconds, so it would miss the fresh ones.
      const { stdout } = await promisify(execFile)('rabbitmqctl', [
        'close_all_connections',
        '-p',
        scratch.vhost,
        '--limit',
        '10000',
        'converge test',
      ]);
      return Number(/Closed (\d+) connections/.exec(stdout)?.[1] ?? 0);
    },
    remove: async () => {
      for (const u of enrolled) await admin.request('DELETE', `/users/${seg(u)}`).catch(() => undefined);
      await scratch.remove().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
