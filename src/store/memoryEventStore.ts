import type { Recorded } from '../core/events/index.ts';
import type { ConvergeEvent } from '../core/events/index.ts';
import { decodeStoredData } from './decodeStored.ts';
import { ConvergeError } from '../core/errors.ts';
import { defaultMaxEventBytes, encodeWrites, expectedRevisionHolds, storeClosed, wrongExpectedRevision, recorded } from './appendRules.ts';
import type { EncodedEvent } from './appendRules.ts';
import { createTreeBuilder, storedLeafHash } from './audit/auditTree.ts';
import { createLastSeenMemory } from './lastSeenMemory.ts';
import { createNotifier } from './notifier.ts';
import { findSendByReading } from './findSend.ts';
import { columnsFromReadAll } from './nodeColumns.ts';
import { addCells, ageBounds, ageOf, timeFieldOf } from './storeStats.ts';
import type { AgeBucket } from './storeStats.ts';
import { createPollingSubscription } from './pollingSubscription.ts';
import type { AppendResult, EventStore, ReadAllOptions, ReadStreamOptions, SubscribeOptions } from './port.ts';

// The in-memory adapter (Emmett ships one beside the port). It keeps events as the
// JSON a durable store would hold and decodes them on read, so tests that pass here see the
// same copies, schema checks and errors they would see against SQLite.

export type MemoryEventStoreOptions = Readonly<{ maxEventBytes?: number; readBatchSize?: number }>;

type Row = EncodedEvent & Readonly<{ stream: string; revision: bigint; position: bigint; leaf: Buffer }>;

export function createMemoryEventStore(options: MemoryEventStoreOptions = {}): EventStore {
  const maxEventBytes = options.maxEventBytes ?? defaultMaxEventBytes;
  const readBatchSize = options.readBatchSize ?? 1000;
  /** log[i] has position i + 1: positions start at 1 and are never reused. */
  const log: Row[] = [];
  const streams = new Map<string, Row[]>();
  const byId = new Map<string, Row>();
  /** Rows of each type in position order: the in-memory counterpart of an index by type (SubscribeOptions.types). */
  const byType = new Map<string, Row[]>();
  const checkpoints = new Map<string, bigint>();
  /** The audit tree over `log`, grown by each append as the durable stores grow theirs in the append's transaction. */
  const tree = createTreeBuilder();
  const lastSeen = createLastSeenMemory();
  const notifier = createNotifier();
  let closed = false;

  const open = (): void => {
    if (closed) throw storeClosed('memory');
  };
  const decode = (r: Row): Recorded =>
    recorded(
      { type: r.type, data: decodeStoredData(r.type, JSON.parse(r.data), JSON.parse(r.metadata), r) } as ConvergeEvent,
      r.id,
      r.stream,
      r.revision,
      r.position,
    );
  const revisionOf = (stream: string): bigint => BigInt((streams.get(stream)?.length ?? 0) - 1);

  function readAfter(after: bigint | null, limit: number, types: ReadonlySet<string> | null): Recorded[] {
    const from = after === null || after < 0n ? 0n : after;
    if (types !== null) return readTypesAfter(from, limit, types);
    const out: Recorded[] = [];
    for (let i = Number(from); i < log.length && out.length < limit; i++) out.push(decode(log[i]!));
    return out;
  }

  /** Merge the per-type lists after `after`: only the wanted rows are visited and decoded. */
  function readTypesAfter(after: bigint, limit: number, types: ReadonlySet<string>): Recorded[] {
    const lists = [...types].map((t) => byType.get(t) ?? []);
    const at = lists.map((rows) => {
      let lo = 0;
      let hi = rows.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (rows[mid]!.position <= after) lo = mid + 1;
        else hi = mid;
      }
      return lo;
    });
    const out: Recorded[] = [];
    while (out.length < limit) {
      let pick = -1;
      for (let k = 0; k < lists.length; k++) {
        const r = lists[k]![at[k]!];
        if (r !== undefined && (pick < 0 || r.position < lists[pick]![at[pick]!]!.position)) pick = k;
      }
      if (pick < 0) break;
      out.push(decode(lists[pick]![at[pick]!++]!));
    }
    return out;
  }

  const store: EventStore = {
    kind: 'memory',

    async append(writes) {
      open();
      const encoded = encodeWrites(writes, maxEventBytes);
      // Check everything before touching anything: the whole call is all or nothing. Writes
      // apply in order, so a later write to the same stream sees the earlier one's events.
      const pendingRevision = new Map<string, bigint>();
      const pendingIds = new Map<string, string>();
      const plans = encoded.map((w) => {
        const fresh: EncodedEvent[] = [];
        for (const e of w.events) {
          const storedIn = byId.get(e.id)?.stream ?? pendingIds.get(e.id);
          if (storedIn === undefined) fresh.push(e);
          else if (storedIn !== w.stream) {
            throw new ConvergeError(
              'CONVERGE_ERR_DUPLICATE_EVENT_ID',
              `append: event id ${e.id} is already stored in ${storedIn}, not ${w.stream}`,
              {
                details: { id: e.id, stream: w.stream, storedIn },
              },
            );
          }
        }
        const current = pendingRevision.get(w.stream) ?? revisionOf(w.stream);
        // A retry whose events are all stored already succeeds even if the stream moved on.
        const retry = w.events.length > 0 && fresh.length === 0;
        if (!retry && !expectedRevisionHolds(w.expected, current)) throw wrongExpectedRevision(w.stream, w.expected, current);
        for (const e of fresh) pendingIds.set(e.id, w.stream);
        pendingRevision.set(w.stream, current + BigInt(fresh.length));
        return { stream: w.stream, fresh };
      });
      let position: bigint | null = null;
      const result: AppendResult['streams'][number][] = [];
      for (const { stream, fresh } of plans) {
        let rows = streams.get(stream);
        if (rows === undefined && fresh.length > 0) streams.set(stream, (rows = []));
        for (const e of fresh) {
          const revision = BigInt(rows!.length);
          const at = BigInt(log.length + 1);
          const row: Row = { ...e, stream, revision, position: at, leaf: storedLeafHash(at, stream, revision, e.type, e.data, e.metadata) };
          tree.appendLeafHash(row.leaf);
          rows!.push(row);
          log.push(row);
          const ofType = byType.get(row.type);
          if (ofType === undefined) byType.set(row.type, [row]);
          else ofType.push(row);
          byId.set(e.id, row);
          position = row.position;
        }
        result.push({ stream, nextExpected: revisionOf(stream), written: fresh.length });
      }
      if (position !== null) notifier.notify();
      return { streams: result, position };
    },

    async readStream(stream, opts: ReadStreamOptions = {}) {
      open();
      const rows = streams.get(stream) ?? [];
      const limit = opts.limit ?? Number.MAX_SAFE_INTEGER;
      const out: Recorded[] = [];
      if (opts.direction === 'backwards') {
        const from = opts.fromRevision === undefined ? rows.length - 1 : Math.min(Number(opts.fromRevision), rows.length - 1);
        for (let i = from; i >= 0 && out.length < limit; i--) out.push(decode(rows[i]!));
      } else {
        for (let i = Number(opts.fromRevision ?? 0n); i < rows.length && out.length < limit; i++) out.push(decode(rows[i]!));
      }
      return out;
    },

    async *readAll(opts: ReadAllOptions = {}) {
      open();
      let after = opts.after ?? null;
      let left = opts.limit ?? Number.MAX_SAFE_INTEGER;
      while (left > 0) {
        open();
        const batch = readAfterRaw(after, Math.min(left, readBatchSize), opts.streamPrefix);
        if (batch.scanned === null) return;
        after = batch.scanned;
        if (batch.events.length > 0) {
          left -= batch.events.length;
          yield batch.events;
        }
      }
    },

    // The definition (nodeColumns.ts). `this`, not the store: a wrapper that replaces readAll
    // (`{ ...store, readAll }`) has its own readAll read, as readNodeColumns always did.
    readColumns(opts) {
      return columnsFromReadAll(this, opts);
    },

    findSend(node, digest) {
      return findSendByReading((stream, o) => store.readStream(stream, o), node, digest);
    },

    async headPosition() {
      open();
      return log.length === 0 ? null : BigInt(log.length);
    },

    async saveLastSeen(engine, flushedAt, nodes) {
      open();
      lastSeen.save(engine, flushedAt, nodes);
    },

    async loadLastSeen() {
      open();
      return lastSeen.load();
    },

    async auditHead() {
      open();
      return { size: BigInt(tree.size), root: tree.root().toString('hex'), denseFrom: 1n, keptByStore: true };
    },

    async readStored(opts = {}) {
      open();
      const from = opts.after === undefined || opts.after === null || opts.after < 0n ? 0 : Number(opts.after);
      return log.slice(from, from + (opts.limit ?? readBatchSize)).map((r) => ({
        position: r.position,
        id: r.id,
        stream: r.stream,
        revision: r.revision,
        type: r.type,
        data: Buffer.from(r.data, 'utf8'),
        metadata: Buffer.from(r.metadata, 'utf8'),
        leafHash: r.leaf,
      }));
    },

    async stats({ now, onProgress }) {
      open();
      const bounds = ageBounds(now);
      const cells = new Map<string, { type: string; age: AgeBucket; events: number; bytes: number }>();
      const head = BigInt(log.length);
      for (let i = 0; i < log.length; i++) {
        const r = log[i]!;
        const field = timeFieldOf(r.type);
        const time = field === undefined ? null : (JSON.parse(r.data) as Record<string, unknown>)[field];
        addCells(cells, [
          { type: r.type, age: ageOf(time, bounds), events: 1, bytes: Buffer.byteLength(r.data) + Buffer.byteLength(r.metadata) },
        ]);
        if ((i + 1) % 100_000 === 0) onProgress?.(BigInt(i + 1), head);
      }
      return { cells: [...cells.values()], storage: [] };
    },

    subscribe(opts: SubscribeOptions) {
      open();
      return createPollingSubscription(
        {
          readAfter: async (after, limit, types) => {
            open();
            return readAfter(after, limit, types);
          },
          headPosition: () => store.headPosition(),
          getCheckpoint: (name) => store.getCheckpoint(name),
          setCheckpoint: (name, p) => store.setCheckpoint(name, p),
          notifier,
          // Nothing outside this process can append here, so the tick is only a safety net.
          pollMs: 1_000,
        },
        opts,
      );
    },

    async getCheckpoint(name) {
      open();
      return checkpoints.get(name) ?? null;
    },

    async setCheckpoint(name, position) {
      open();
      checkpoints.set(name, position);
    },

    async close() {
      closed = true;
      notifier.notify();
    },
  };

  /** Like readAfter, but also says how far it scanned, so a prefix filter skips ahead in bounded steps. */
  function readAfterRaw(after: bigint | null, limit: number, prefix?: string): { events: Recorded[]; scanned: bigint | null } {
    const events: Recorded[] = [];
    let i = after === null || after < 0n ? 0 : Number(after);
    const end = Math.min(log.length, i + Math.max(limit, readBatchSize) * 4);
    if (i >= log.length) return { events, scanned: null };
    for (; i < end && events.length < limit; i++) {
      const r = log[i]!;
      if (prefix === undefined || r.stream.startsWith(prefix)) events.push(decode(r));
    }
    return { events, scanned: BigInt(i) };
  }

  return store;
}
