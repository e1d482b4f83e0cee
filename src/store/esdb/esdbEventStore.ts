import { createEsdbAudit } from './esdbAudit.ts';
import { EventStoreDBClient, jsonEvent } from '@eventstore/db-client';
import { ConvergeError } from '../../core/errors.ts';
import { rolloutStreamPrefix, streamPrefix as nodeStreamPrefix } from '../../core/events/index.ts';
import { defaultMaxEventBytes, storeClosed } from '../appendRules.ts';
import { findSendByReading } from '../findSend.ts';
import { createLastSeenMemory } from '../lastSeenMemory.ts';
import { columnsFromReadAll } from '../nodeColumns.ts';
import type { EventStore, Subscription } from '../port.ts';
import { createEsdbAppend } from './esdbAppend.ts';
import type { EsdbClient } from './esdbClient.ts';
import { esdbError } from './esdbErrors.ts';
import { createEsdbReads } from './esdbReads.ts';
import { createEsdbSubscription } from './esdbSubscription.ts';

// EventStoreDB adapter (docs/design.md#5-the-store-port): for fleets that outgrow one machine.
// Differences from the SQLite adapter, all documented in docs/store.md:
// - a many-stream append is concurrent per-stream appends: atomic per stream, not per call
//   (EventStoreDB has no cross-stream transaction; esdbAppend.ts);
// - the global position is the commit position of $all (commit = prepare for gRPC appends);
// - event-id idempotency is what the server gives for explicit expected revisions, plus a check
//   of the stream's tail on a conflict; an id reused in *another* stream is not detected;
// - events in $all that are not Converge events (system events, other applications) are skipped.
// This file wires the parts: esdbReads.ts, esdbAppend.ts, esdbSubscription.ts, esdbErrors.ts.

export type { EsdbClient } from './esdbClient.ts';
export { grpcText } from './esdbErrors.ts';

export type EsdbEventStoreOptions = Readonly<{
  maxEventBytes?: number;
  /** Streams the live subscription follows (server-side filter). Default: Converge's own, `node-` and `rollout-`. */
  streamPrefix?: string;
  readBatchSize?: number;
  /** Backoff bounds when a subscription drops and resubscribes (ms). */
  minBackoffMs?: number;
  maxBackoffMs?: number;
  /**
   * Test seam: use this client instead of one built from the connection string (the conformance
   * suite runs the adapter over an emulated client, test/contracts/fakeEsdbClient.ts). The store
   * disposes it on close.
   */
  client?: EsdbClient;
}>;

// Not `$`-prefixed: streams starting with `$` are system streams that EventStoreDB's default
// ACL ($systemStreamAcl) lets only admins read or write, and the engine need not run as admin.
// The name is outside the `node-` category, so reads and subscriptions never see checkpoints.
const checkpointStream = (name: string): string => `converge-checkpoint-${name}`;

function connect(connectionString: string, options: EsdbEventStoreOptions): EsdbClient {
  try {
    return options.client ?? EventStoreDBClient.connectionString(connectionString);
  } catch (err) {
    throw new ConvergeError(
      'CONVERGE_ERR_CONFIG_INVALID',
      `esdb: cannot use connection string: ${err instanceof Error ? err.message : String(err)}`,
      { cause: err },
    );
  }
}

export function createEsdbEventStore(connectionString: string, options: EsdbEventStoreOptions = {}): EventStore {
  const client = connect(connectionString, options);
  let closed = false;
  const lastSeen = createLastSeenMemory();
  const subscriptions = new Set<Subscription>();
  const open = (): void => {
    if (closed) throw storeClosed('esdb');
  };
  const reads = createEsdbReads({ client, open, readBatchSize: options.readBatchSize ?? 1000 });
  const audit = createEsdbAudit(client, open);
  const append = createEsdbAppend({ client, reads, open, maxEventBytes: options.maxEventBytes ?? defaultMaxEventBytes });

  const store: EventStore = {
    kind: 'esdb',
    append,
    readStream: reads.readStream,
    readAll: reads.readAll,

    // The definition (nodeColumns.ts). `this`, not the store: a wrapper that replaces readAll
    // (`{ ...store, readAll }`) has its own readAll read, as readNodeColumns always did.
    readColumns(opts) {
      return columnsFromReadAll(this, opts);
    },

    headPosition: reads.headPosition,
    findSend: (node, digest) => findSendByReading(reads.readStream, node, digest),
    auditHead: audit.auditHead,
    readStored: audit.readStored,

    subscribe(opts) {
      open();
      const sub = createEsdbSubscription(
        {
          client,
          store,
          prefixes: options.streamPrefix === undefined ? [nodeStreamPrefix, rolloutStreamPrefix] : [options.streamPrefix],
          backoff: { minMs: options.minBackoffMs ?? 100, maxMs: options.maxBackoffMs ?? 10_000 },
          isClosed: () => closed,
          onStopped: (s) => subscriptions.delete(s),
        },
        opts,
      );
      subscriptions.add(sub);
      return sub;
    },

    async getCheckpoint(name) {
      open();
      const last = (await reads.readRaw(checkpointStream(name), 'backwards', undefined, 1))[0];
      if (last === undefined) return null;
      const p = (last.data as { position?: unknown }).position;
      return typeof p === 'string' ? BigInt(p) : null;
    },

    async setCheckpoint(name, position) {
      open();
      const stream = checkpointStream(name);
      try {
        const r = await client.appendToStream(stream, jsonEvent({ type: 'ConvergeCheckpoint', data: { position: position.toString() } }));
        // Only the newest checkpoint matters: let the server scavenge the rest.
        if (r.nextExpectedRevision === 0n) await client.setStreamMetadata(stream, { maxCount: 1 });
      } catch (err) {
        throw esdbError(err, `save checkpoint ${name}`);
      }
    },

    // No table to overwrite in place: the lease lives in this process (lastSeenMemory.ts).
    async saveLastSeen(engine, flushedAt, nodes) {
      open();
      lastSeen.save(engine, flushedAt, nodes);
    },

    async loadLastSeen() {
      open();
      return lastSeen.load();
    },

    async close() {
      if (closed) return;
      closed = true;
      await Promise.allSettled([...subscriptions].map((s) => s.stop()));
      await client.dispose();
    },
  };
  return store;
}
