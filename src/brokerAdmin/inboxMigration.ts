import amqp from 'amqplib';
import type { ConfirmChannel, GetMessage, Options } from 'amqplib';
import { ConvergeError } from '../core/errors.ts';
import { names, nodeQueueOf } from '../transport/brokerNames.ts';
import { assertTopology, inboxArgumentsOf, nodeTopology } from '../transport/topology.ts';
import type { InboxKind } from '../transport/topology.ts';
import { adminError, createManagementClient, seg } from './managementClient.ts';
import { vhostOfAmqpUrl } from './deadLetterPolicy.ts';

// `converge broker migrate-inboxes`: a node's inbox is declared with
// `inboxArguments` now (topology.ts), and a queue's arguments are part of its identity, so an
// inbox an earlier Converge declared (a quorum queue) cannot be re-declared in place: it is
// deleted and declared again. Only the latest declaration matters to a node, so that is what
// moves; the store keeps every one (it is the outbox).
//
// Per inbox, in an order that survives the command dying at any step:
//   1. read every ready message (unacknowledged), keep the last: the latest declaration sent;
//   2. copy it, properties and all, to a durable holding queue `converge.inbox-migration.<node>`
//      and wait for the broker's confirm;
//   3. delete the old inbox (the messages read in 1 go with it);
//   4. declare the inbox as `nodeTopology` does (bound to mesh.declarations);
//   5. move the copy into it — unless the relay already put a newer declaration there — and
//      delete the holding queue.
// A run starts by finishing every holding queue it finds, so one cut short between 3 and 5 is
// completed by the next. What it cannot move: a declaration delivered to the node and not yet
// acknowledged when the old inbox is deleted (the node has it; docs/operations.md).

export const holdingQueuePrefix = 'converge.inbox-migration.';

export type InboxForm = Readonly<{ type: string; arguments: Readonly<Record<string, unknown>> }>;

export type OutdatedInbox = Readonly<{ queue: string; node: string; messages: number; consumers: number } & InboxForm>;

export type InboxMigrationProgress = Readonly<{
  index: number;
  total: number;
  queue: string;
  /** Ready messages the old inbox held; the latest of them is kept. */
  held: number;
  /** Whether the latest was moved into the new inbox (false: there was none, or a newer one arrived). */
  moved: boolean;
  /** Finishing what an earlier, interrupted run left in a holding queue. */
  resumed: boolean;
}>;

export type InboxMigrationOptions = Readonly<{
  managementUrl: string;
  /** The engine's AMQP URL; its vhost is the one migrated. */
  amqpUrl: string;
  /** The form to migrate to (the engine's --inbox-queue). */
  inbox: InboxKind;
  /** Only list what would change (the default of the command). */
  dryRun: boolean;
  onProgress?: ((p: InboxMigrationProgress) => void) | undefined;
  /** Queues per management API page (default 500). */
  pageSize?: number;
}>;

export type InboxMigrationResult = Readonly<{
  vhost: string;
  inbox: InboxKind;
  /** Node inboxes found. */
  inboxes: number;
  outdated: readonly OutdatedInbox[];
  /** Holding queues left by an interrupted run. */
  interrupted: readonly string[];
  migrated: number;
  moved: number;
}>;

type ListedQueue = { name: string; type?: string; arguments?: Record<string, unknown>; messages_ready?: number; consumers?: number };

/** Whether a queue's arguments are the ones `nodeTopology` declares for `kind` (so re-declaring it succeeds). */
export function isCurrentInbox(args: Readonly<Record<string, unknown>>, kind: InboxKind): boolean {
  const want = Object.entries(inboxArgumentsOf[kind]);
  const have = Object.keys(args).filter((k) => k.startsWith('x-'));
  return have.length === want.length && want.every(([k, v]) => args[k] === v);
}

/** Every queue of the vhost whose name starts `node.` or is a holding queue, page by page. */
async function listInboxes(managementUrl: string, vhost: string, pageSize: number): Promise<ListedQueue[]> {
  const admin = createManagementClient({ managementUrl, timeoutMs: 60_000 });
  const pattern = encodeURIComponent(`^(${nodeQueueOf('').replace('.', '\\.')}|${holdingQueuePrefix.replace(/\./g, '\\.')})`);
  const out: ListedQueue[] = [];
  for (let page = 1; ; page++) {
    const path = `/queues/${seg(vhost)}?page=${page}&page_size=${pageSize}&name=${pattern}&use_regex=true&columns=name,type,arguments,messages_ready,consumers`;
    const res = await admin.request('GET', path);
    if (res.status === 404)
      throw new ConvergeError('CONVERGE_ERR_BROKER_ADMIN', `vhost ${vhost} does not exist on the broker`, { details: { vhost } });
    if (res.status !== 200) throw adminError('GET', path, res);
    const body = res.body as { items?: ListedQueue[]; page_count?: number };
    out.push(...(body.items ?? []));
    if ((body.page_count ?? 0) <= page) return out;
  }
}

/** The properties a moved message keeps (a declaration's, docs/design.md §1). */
const propertiesOf = (m: GetMessage): Options.Publish => {
  const p = m.properties as unknown as Record<string, unknown>;
  const kept: Record<string, unknown> = {};
  for (const k of [
    'contentType',
    'contentEncoding',
    'headers',
    'deliveryMode',
    'priority',
    'correlationId',
    'replyTo',
    'expiration',
    'messageId',
    'timestamp',
    'type',
    'userId',
    'appId',
  ])
    if (p[k] !== undefined && p[k] !== null) kept[k] = p[k];
  // A quorum queue adds its delivery count on every delivery: it describes the old inbox, not the declaration.
  const headers = kept['headers'] as Record<string, unknown> | undefined;
  if (headers !== undefined && 'x-delivery-count' in headers) {
    const { ['x-delivery-count']: _count, ...rest } = headers;
    kept['headers'] = rest;
  }
  return kept as Options.Publish;
};

async function confirmed(ch: ConfirmChannel, send: (done: (err: unknown) => void) => void): Promise<void> {
  await new Promise<void>((resolve, reject) =>
    send((err) => (err === null || err === undefined ? resolve() : reject(new Error(`broker refused a publish: ${String(err)}`)))),
  );
}

export async function migrateInboxes(options: InboxMigrationOptions): Promise<InboxMigrationResult> {
  const vhost = vhostOfAmqpUrl(options.amqpUrl);
  const listed = await listInboxes(options.managementUrl, vhost, options.pageSize ?? 500);
  const holding = listed.filter((q) => q.name.startsWith(holdingQueuePrefix)).map((q) => q.name);
  const inboxes = listed.filter((q) => q.name.startsWith(nodeQueueOf('')));
  const outdated: OutdatedInbox[] = inboxes
    .filter((q) => !isCurrentInbox(q.arguments ?? {}, options.inbox))
    .map((q) => ({
      queue: q.name,
      node: q.name.slice(nodeQueueOf('').length),
      type: q.type ?? 'classic',
      arguments: q.arguments ?? {},
      messages: q.messages_ready ?? 0,
      consumers: q.consumers ?? 0,
    }));
  const result = { vhost, inbox: options.inbox, inboxes: inboxes.length, outdated, interrupted: holding, migrated: 0, moved: 0 };
  if (options.dryRun || (outdated.length === 0 && holding.length === 0)) return result;

  const conn = await amqp.connect(options.amqpUrl);
  // A connection the broker closes fails the step in flight; its 'error' event must not end the process.
  conn.on('error', () => undefined);
  // A refused operation closes its channel; every step below runs on the current one.
  let ch: ConfirmChannel | null = null;
  const channel = async (): Promise<ConfirmChannel> => {
    if (ch !== null) return ch;
    const opened = await conn.createConfirmChannel();
    opened.on('error', () => undefined);
    opened.on('close', () => {
      if (ch === opened) ch = null;
    });
    return (ch = opened);
  };
  const total = holding.length + outdated.length;
  let index = 0;
  try {
    /** Steps 4–5: the inbox in its current form, and the kept copy moved into it. */
    const finish = async (node: string): Promise<boolean> => {
      const c = await channel();
      await assertTopology(c, nodeTopology(node, options.inbox));
      const hold = `${holdingQueuePrefix}${node}`;
      const copy = await c.get(hold, { noAck: false });
      let moved = false;
      if (copy !== false) {
        // The relay may have published a newer declaration since the old inbox was deleted.
        if ((await c.checkQueue(nodeQueueOf(node))).messageCount === 0) {
          await confirmed(c, (done) =>
            c.publish(names.declarationsExchange, node, copy.content, { ...propertiesOf(copy), mandatory: true }, done),
          );
          moved = true;
        }
        c.ack(copy, true);
      }
      await c.deleteQueue(hold);
      return moved;
    };

    for (const hold of holding) {
      const node = hold.slice(holdingQueuePrefix.length);
      const moved = await finish(node);
      result.migrated++;
      if (moved) result.moved++;
      options.onProgress?.({ index: ++index, total, queue: nodeQueueOf(node), held: 1, moved, resumed: true });
    }

    for (const inbox of outdated) {
      const c = await channel();
      // Step 1: the latest ready declaration (a quorum inbox may hold many).
      let latest: GetMessage | null = null;
      let held = 0;
      for (;;) {
        const m = await c.get(inbox.queue, { noAck: false });
        if (m === false) break;
        latest = m;
        held++;
      }
      // Step 2: a durable copy before anything is deleted.
      if (latest !== null) {
        const hold = `${holdingQueuePrefix}${inbox.node}`;
        const copy = latest;
        await c.assertQueue(hold, { durable: true });
        await confirmed(c, (done) => c.sendToQueue(hold, copy.content, { ...propertiesOf(copy) }, done));
      }
      // Step 3. Then a fresh channel: RabbitMQ 3.10.8 keeps a channel's state of a queue it read
      // from by name, and a publish on that channel to the queue declared again with another type
      // crashed the channel and closed the connection (541 INTERNAL_ERROR; seen in this command's test).
      await c.deleteQueue(inbox.queue);
      ch = null;
      await c.close().catch(() => undefined);
      const moved =
        latest !== null
          ? await finish(inbox.node)
          : (await assertTopology(await channel(), nodeTopology(inbox.node, options.inbox)), false);
      result.migrated++;
      if (moved) result.moved++;
      options.onProgress?.({ index: ++index, total, queue: inbox.queue, held, moved, resumed: false });
    }
  } finally {
    await conn.close().catch(() => undefined);
  }
  return result;
}
