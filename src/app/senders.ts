import type { Logger } from 'pino';
import type { SendDeclaration, SendDeclarations } from '../api/deps.ts';
import type { SigningKey } from '../core/declaration/index.ts';
import { createSender } from '../engine/send.ts';
import { createBatchSender } from '../engine/sendBatch.ts';
import type { LoadNode } from '../engine/sendView.ts';
import { createSignPool } from '../engine/signPool.ts';
import type { SignPool } from '../engine/signPool.ts';
import type { Metrics } from '../metrics.ts';
import type { EventStore } from '../store/index.ts';

// The engine's senders as serve wires them: one declaration at a time (POST to a node, the demo)
// and in bulk (POST /v1/declarations), each counted in the appended-events metric, since ingest
// counts only what it appends (docs/design.md §7). Bulk sends, the API's and the rollout driver's,
// are signed on one thread of their own (docs/design.md "Sharing the event loop"), so a POST of
// thousands of nodes does not hold the loop that answers the API.

export type Senders = Readonly<{
  /** Null without a signing key, as the others. */
  send: SendDeclaration | null;
  sendMany: SendDeclarations | null;
  /** The signing thread, for the rollout driver to share; its owner stops it. */
  signPool: SignPool | null;
}>;

export type SendersOptions = Readonly<{
  store: EventStore;
  key: SigningKey | null;
  loadNode: LoadNode;
  now: () => Date;
  metrics: Metrics;
  logger: Logger;
  /** Default: a thread started at the first bulk send; null: the engine's own thread signs. */
  signPool?: SignPool | null;
}>;

export function createSenders(options: SendersOptions): Senders {
  const { store, key, loadNode, metrics, logger } = options;
  if (key === null) return { send: null, sendMany: null, signPool: null };
  const signPool =
    options.signPool === null
      ? null
      : (options.signPool ??
        createSignPool({
          key,
          onFailure: (err) => logger.error({ err: err.message }, 'signing thread failed; signing on the engine thread from now on'),
        }));
  const sender = createSender({ store, key, loadNode });
  const batchSender = createBatchSender({ store, key, loadNode, now: options.now, ...(signPool === null ? {} : { signPool }) });
  return {
    send: async (node, resources, opts) => {
      const r = await sender.send(node, resources, opts);
      metrics.eventsAppended.inc({ type: 'DeclarationSent' });
      return { digest: r.digest, serial: r.serial };
    },
    sendMany: async (items) => {
      const r = await batchSender.sendMany(items);
      const sent = r.outcomes.filter((o) => o.ok).length;
      if (sent > 0) metrics.eventsAppended.inc({ type: 'DeclarationSent' }, sent);
      return r;
    },
    signPool,
  };
}
