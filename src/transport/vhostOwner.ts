import type { ConfirmChannel } from 'amqplib';
import type { Logger } from 'pino';
import { ConvergeError } from '../core/errors.ts';
import { sleep } from '../retry.ts';
import type { AmqpConnection } from './amqpConnection.ts';
import { superviseChannel } from './superviseChannel.ts';

// One store per vhost (docs/operations.md#one-store-per-vhost). Engines of two stores on one vhost
// share mesh.reports (one consumes while the other waits, and they swap on a restart), so each
// store holds part of the fleet's reports and neither says so. The vhost names its store in a
// durable queue holding one message (reject-publish once full): the first engine's publish is
// taken and makes it the owner; a later one's is refused, and each reads the owner's message
// (got, then requeued) and starts only if it names its own store, or if no engine of the owner's
// store runs: each running engine consumes from an auto-delete queue named by its store.

export const vhostOwnerQueue = 'converge.store';

/** What an engine says of its store: the identity compared, and names for people. */
export type StoreClaim = Readonly<{ id: string; store: string; engine: string }>;

export type ClaimOptions = Readonly<{ logger: Logger; allowShared?: boolean }>;

const queueArguments = { 'x-max-length': 1, 'x-overflow': 'reject-publish' } as const;

/**
 * Claim the vhost for `mine`, or learn its owner: throws CONVERGE_ERR_VHOST_SHARED while an engine
 * of another store runs on it, unless allowed. An owner with no engine running is taken over, with
 * a warning (a store moved, or a test's store gone).
 */
export async function claimVhost(
  conn: AmqpConnection,
  mine: StoreClaim,
  options: ClaimOptions,
): Promise<Readonly<{ owner: string; shared: boolean }>> {
  const ch = await conn.createConfirmChannel();
  try {
    await ch.assertQueue(vhostOwnerQueue, { durable: true, arguments: queueArguments });
    // Refused once the queue holds a claim; taken if empty. Either way the owner is the queue's
    // head: a claim taken while the owner's message was out being read sits behind it.
    await publishClaim(ch, mine);
    let owner = await readOwner(ch);
    if (owner.id !== mine.id && !(await isRunning(conn, owner.id))) {
      options.logger.warn(
        { queue: vhostOwnerQueue, owner, mine },
        `this vhost's reports were recorded in store ${owner.id} (${owner.store}), which no engine runs now: from now on they are recorded in this store, ${mine.id}`,
      );
      await ch.purgeQueue(vhostOwnerQueue);
      await publishClaim(ch, mine);
      owner = await readOwner(ch);
    }
    if (owner.id === mine.id) {
      announce(conn, mine.id, options.logger);
      return { owner: owner.id, shared: false };
    }
    const said = `this vhost's reports are recorded in store ${owner.id} (${owner.store}, engine ${owner.engine}), which an engine runs now; this engine's store is ${mine.id} (${mine.store}). Two stores on one vhost split the reports between them`;
    if (options.allowShared !== true) {
      throw new ConvergeError('CONVERGE_ERR_VHOST_SHARED', `${said}: give each store its own vhost (or --allow-shared-vhost)`, {
        details: { queue: vhostOwnerQueue, owner, mine },
      });
    }
    options.logger.error({ queue: vhostOwnerQueue, owner, mine }, `--allow-shared-vhost: ${said}`);
    announce(conn, mine.id, options.logger);
    return { owner: owner.id, shared: true };
  } finally {
    await ch.close().catch(() => undefined);
  }
}

/** The queue that exists while an engine of store `id` runs: auto-deleted when its last consumer goes. */
export const runningQueue = (id: string): string => `${vhostOwnerQueue}.${id}.running`;

/** Whether an engine of store `id` runs on this vhost (its running queue exists). */
async function isRunning(conn: AmqpConnection, id: string): Promise<boolean> {
  // A passive declare of a missing queue closes its channel (404): a channel of its own.
  const probe = await conn.createChannel();
  probe.on('error', () => undefined);
  try {
    await probe.checkQueue(runningQueue(id));
    return true;
  } catch (err) {
    if ((err as { code?: unknown }).code === 404) return false;
    throw err;
  } finally {
    await probe.close().catch(() => undefined);
  }
}

/** Consume from this store's running queue for as long as the connection lives (again after a reconnect). */
function announce(conn: AmqpConnection, id: string, logger: Logger): void {
  superviseChannel({
    open: () => conn.createChannel(),
    setup: async (ch) => {
      const q = runningQueue(id);
      await ch.assertQueue(q, { durable: false, autoDelete: true });
      await ch.consume(q, () => undefined, { noAck: true });
    },
    logger,
    name: 'store-running',
    until: conn.closed,
  });
}

/** True when the broker took our message (the queue was empty), false when it refused it (full). */
function publishClaim(ch: ConfirmChannel, mine: StoreClaim): Promise<boolean> {
  const body = Buffer.from(JSON.stringify({ ...mine, since: new Date().toISOString() }));
  return new Promise((resolve) => {
    ch.sendToQueue(vhostOwnerQueue, body, { persistent: true, contentType: 'application/json' }, (err) => resolve(err == null));
  });
}

/** The owner's message, got and requeued; another engine reading it at the same moment holds it, so a miss is retried. */
async function readOwner(ch: ConfirmChannel): Promise<StoreClaim> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const m = await ch.get(vhostOwnerQueue, { noAck: false });
    if (m !== false) {
      ch.nack(m, false, true);
      const v = JSON.parse(m.content.toString('utf8')) as Partial<StoreClaim>;
      return { id: String(v.id ?? '?'), store: String(v.store ?? '?'), engine: String(v.engine ?? '?') };
    }
    await sleep(100 + attempt * 20);
  }
  throw new ConvergeError('CONVERGE_ERR_BROKER_UNAVAILABLE', `the queue ${vhostOwnerQueue} is full but its message could not be read`);
}
