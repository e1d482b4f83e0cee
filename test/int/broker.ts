import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { promisify } from 'node:util';
import pino from 'pino';
import { enrollNode } from '../../src/accounts/index.ts';
import { createManagementClient, seg } from '../../src/accounts/managementClient.ts';
import { createScratchVhost, defaultBroker, probeBroker } from '../../src/faults/scratchVhost.ts';
import type { ScratchVhost } from '../../src/faults/scratchVhost.ts';

// Shared by test/int: is the broker there (fail under CONVERGE_REQUIRE_BROKER=1, else skip
// loudly), a fresh vhost per file so DESIGN §1's names stay exact without runs interfering,
// and real node accounts so user_id is validated by RabbitMQ as in production.

export const logger = pino({ level: process.env['LOG_LEVEL'] ?? 'silent' });

/** Run `body` if the broker is reachable; otherwise one failing (CI) or loudly skipped test. */
export async function withBroker(what: string, body: () => void): Promise<void> {
  const probe = await probeBroker();
  if (probe.ok) return body();
  if (process.env['CONVERGE_REQUIRE_BROKER'] === '1') {
    test(`${what} needs RabbitMQ (CONVERGE_REQUIRE_BROKER=1)`, () => assert.fail(`broker unreachable: ${probe.reason}`));
  } else {
    console.warn(`\n*** SKIPPING ${what}: RabbitMQ unreachable (${probe.reason}); set CONVERGE_REQUIRE_BROKER=1 to fail instead ***\n`);
    test(`${what} — SKIPPED: ${probe.reason}`, { skip: probe.reason }, () => {});
  }
}

export type Lab = Readonly<{
  scratch: ScratchVhost;
  /** Engine URL (guest, the scratch vhost). */
  url: string;
  /** Enroll a node account; returns its amqp URL. */
  enroll: (node: string) => Promise<string>;
  /** `rabbitmqctl close_all_connections` scoped to this vhost. */
  closeAllConnections: () => Promise<void>;
  remove: () => Promise<void>;
}>;

export const uniqueTag = (): string => randomBytes(3).toString('hex');

export async function createLab(prefix: string): Promise<Lab> {
  const scratch = await createScratchVhost(prefix);
  const enrolled: string[] = [];
  const admin = createManagementClient({ managementUrl: scratch.managementUrl });
  return {
    scratch,
    url: scratch.amqpUrl,
    enroll: async (node) => {
      const e = await enrollNode(node, { managementUrl: scratch.managementUrl, vhost: scratch.vhost });
      enrolled.push(node);
      const base = new URL(defaultBroker.amqpUrl);
      return `amqp://${seg(node)}:${seg(e.password)}@${base.host}/${seg(scratch.vhost)}`;
    },
    closeAllConnections: async () => {
      await promisify(execFile)('rabbitmqctl', ['close_all_connections', '--vhost', scratch.vhost, '--limit', '10000', 'test']);
    },
    remove: async () => {
      for (const u of enrolled) await admin.request('DELETE', `/users/${seg(u)}`).catch(() => undefined);
      await scratch.remove();
    },
  };
}

export async function until<T>(what: string, f: () => Promise<T | null | undefined | false> | T | null | undefined | false, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
