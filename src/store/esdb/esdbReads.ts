import { BACKWARDS, END, FORWARDS, START, StreamNotFoundError } from '@eventstore/db-client';
import type { AllStreamRecordedEvent, Position, RecordedEvent } from '@eventstore/db-client';
import type { Recorded } from '../../core/events/index.ts';
import { isEventType } from '../../core/events/index.ts';
import type { ConvergeEvent } from '../../core/events/index.ts';
import { decodeStoredData } from '../decodeStored.ts';
import { recorded } from '../appendRules.ts';
import type { ReadAllOptions, ReadStreamOptions } from '../port.ts';
import type { EsdbClient } from './esdbClient.ts';
import { esdbError } from './esdbErrors.ts';

// The EventStoreDB store's reads: of one stream, of $all, and its head. Events in $all that are
// not Converge events (system events, other applications) are skipped — and so, on this store
// alone, is an event of a type a newer Converge added (docs/operations.md "Upgrades").

export const toPosition = (p: bigint): Position => ({ commit: p, prepare: p });

export function toRecorded(e: RecordedEvent | AllStreamRecordedEvent): Recorded | null {
  if (!isEventType(e.type) || !e.isJson || e.position === undefined) return null;
  const at = { position: e.position.commit, stream: e.streamId, id: e.id };
  return recorded(
    { type: e.type, data: decodeStoredData(e.type, e.data, e.metadata, at) } as ConvergeEvent,
    e.id,
    e.streamId,
    e.revision,
    e.position.commit,
  );
}

export type EsdbReadDeps = Readonly<{
  client: EsdbClient;
  /** Throws once the store is closed. */
  open: () => void;
  readBatchSize: number;
}>;

export type EsdbReads = Readonly<{
  /** Events of a stream from a revision, forwards or backwards, as stored; a missing stream has none. */
  readRaw: (
    stream: string,
    direction: 'forwards' | 'backwards',
    from: bigint | undefined,
    maxCount: number | undefined,
  ) => Promise<RecordedEvent[]>;
  /** The revision of the stream's last event (-1n: no stream). */
  currentRevision: (stream: string) => Promise<bigint>;
  readStream: (stream: string, opts?: ReadStreamOptions) => Promise<readonly Recorded[]>;
  readAll: (opts?: ReadAllOptions) => AsyncIterable<readonly Recorded[]>;
  headPosition: () => Promise<bigint | null>;
}>;

export function createEsdbReads({ client, open, readBatchSize }: EsdbReadDeps): EsdbReads {
  async function readRaw(
    stream: string,
    direction: 'forwards' | 'backwards',
    from: bigint | undefined,
    maxCount: number | undefined,
  ): Promise<RecordedEvent[]> {
    const out: RecordedEvent[] = [];
    try {
      const read = client.readStream(stream, {
        direction: direction === 'backwards' ? BACKWARDS : FORWARDS,
        fromRevision: from ?? (direction === 'backwards' ? END : START),
        ...(maxCount === undefined ? {} : { maxCount }),
      });
      for await (const r of read) if (r.event !== undefined) out.push(r.event as RecordedEvent);
    } catch (err) {
      if (err instanceof StreamNotFoundError) return [];
      throw esdbError(err, `read ${stream}`);
    }
    return out;
  }

  const currentRevision = async (stream: string): Promise<bigint> => (await readRaw(stream, 'backwards', undefined, 1))[0]?.revision ?? -1n;

  async function readStream(stream: string, opts: ReadStreamOptions = {}): Promise<readonly Recorded[]> {
    open();
    const raw = await readRaw(stream, opts.direction ?? 'forwards', opts.fromRevision, opts.limit);
    return raw.map(toRecorded).filter((e): e is Recorded => e !== null);
  }

  async function* readAll(opts: ReadAllOptions = {}): AsyncIterable<readonly Recorded[]> {
    let after = opts.after ?? null;
    let left = opts.limit ?? Number.MAX_SAFE_INTEGER;
    while (left > 0) {
      open();
      const batch: Recorded[] = [];
      let raw = 0;
      let last: bigint | null = null;
      try {
        const read = client.readAll({
          direction: FORWARDS,
          fromPosition: after === null ? START : toPosition(after),
          maxCount: readBatchSize,
        });
        for await (const r of read) {
          raw++;
          const e = r.event;
          if (e === undefined) continue;
          last = e.position.commit;
          // fromPosition is inclusive in a read; the port's `after` is exclusive.
          if (after !== null && e.position.commit <= after) continue;
          if (opts.streamPrefix !== undefined && !e.streamId.startsWith(opts.streamPrefix)) continue;
          const rec = toRecorded(e);
          if (rec !== null && batch.length < left) batch.push(rec);
        }
      } catch (err) {
        throw esdbError(err, 'read $all');
      }
      if (batch.length > 0) {
        left -= batch.length;
        yield batch;
      }
      if (raw < readBatchSize || last === null || last === after) return;
      after = last;
    }
  }

  async function headPosition(): Promise<bigint | null> {
    open();
    try {
      // The newest Converge event; system events after it do not count.
      for await (const r of client.readAll({ direction: BACKWARDS, fromPosition: END, maxCount: 4096 })) {
        if (r.event !== undefined && isEventType(r.event.type)) return r.event.position.commit;
      }
    } catch (err) {
      throw esdbError(err, 'read $all');
    }
    return null;
  }

  return { readRaw, currentRevision, readStream, readAll, headPosition };
}
