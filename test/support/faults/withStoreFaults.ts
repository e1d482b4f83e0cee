import { ConvergeError } from '../../../src/core/errors.ts';
import { columnsFromReadAll } from '../../../src/store/nodeColumns.ts';
import type { AppendResult, EventStore, StreamWrite } from '../../../src/store/port.ts';

// An EventStore that breaks on command, for engine tests. Faults are switched at run time so one
// test can fail appends, watch the engine hold (nack, retry, never ack), lift the fault and check
// nothing was lost or written twice.

export type StoreFaultCounters = Readonly<{
  appendsPassed: number;
  appendsFailed: number;
  /** Appends written to the inner store whose success was then reported as a failure. */
  appendAcksLost: number;
  readsFailed: number;
}>;

export type StoreFaults = Readonly<{
  /**
   * Fail appends with CONVERGE_ERR_STORE_UNAVAILABLE without writing (a full disk, an unwritable
   * directory, a store that cannot be reached): `true` until switched off, a number for the next
   * n appends only, `false` to stop.
   */
  failAppends: (on: boolean | number) => void;
  /**
   * Write, then throw as if the write failed (a timeout after commit, a crash between the commit
   * and the reply). The engine's retry must be a no-op thanks to deterministic event ids.
   */
  loseAppendAcks: (on: boolean | number) => void;
  /** Fail readStream, readAll and headPosition the same way. */
  failReads: (on: boolean) => void;
  counters: () => StoreFaultCounters;
}>;

export type FaultyEventStore = EventStore & Readonly<{ faults: StoreFaults; inner: EventStore }>;

const unavailable = (what: string): ConvergeError =>
  new ConvergeError('CONVERGE_ERR_STORE_UNAVAILABLE', `${what}: injected fault (store unavailable)`, { details: { injected: true } });

/** `true` → always, n → the next n times, `false`/0 → never. */
function switchOf(initial: boolean | number = false) {
  let remaining = initial === true ? Infinity : initial === false ? 0 : initial;
  return {
    set: (on: boolean | number) => {
      remaining = on === true ? Infinity : on === false ? 0 : Math.max(0, on);
    },
    /** Whether this call should fail; consumes one of n. */
    take: (): boolean => {
      if (remaining <= 0) return false;
      remaining--;
      return true;
    },
  };
}

export function withStoreFaults(inner: EventStore): FaultyEventStore {
  const failAppend = switchOf();
  const loseAck = switchOf();
  let readsFail = false;
  const c = { appendsPassed: 0, appendsFailed: 0, appendAcksLost: 0, readsFailed: 0 };

  const guardRead = (what: string): void => {
    if (readsFail) {
      c.readsFailed++;
      throw unavailable(what);
    }
  };

  return {
    kind: inner.kind,
    inner,
    async append(writes: readonly StreamWrite[]): Promise<AppendResult> {
      if (failAppend.take()) {
        c.appendsFailed++;
        throw unavailable('append');
      }
      const result = await inner.append(writes);
      if (loseAck.take()) {
        c.appendAcksLost++;
        throw unavailable('append (written, reply lost)');
      }
      c.appendsPassed++;
      return result;
    },
    async readStream(stream, options) {
      guardRead(`read ${stream}`);
      return inner.readStream(stream, options);
    },
    async *readAll(options) {
      guardRead('read all');
      yield* inner.readAll(options);
    },
    // The port's definition, over this store's readAll: its read faults apply.
    readColumns(options) {
      return columnsFromReadAll(this, options);
    },
    auditHead: () => inner.auditHead(),
    readStored: (options) => inner.readStored(options),
    saveLastSeen: (engine, flushedAt, nodes) => inner.saveLastSeen(engine, flushedAt, nodes),
    loadLastSeen: () => inner.loadLastSeen(),
    async headPosition() {
      guardRead('head position');
      return inner.headPosition();
    },
    async findSend(node, digest) {
      guardRead(`find a send to ${node}`);
      return inner.findSend(node, digest);
    },
    subscribe: (options) => inner.subscribe(options),
    getCheckpoint: (name) => inner.getCheckpoint(name),
    setCheckpoint: (name, position) => inner.setCheckpoint(name, position),
    close: () => inner.close(),
    faults: {
      failAppends: (on) => failAppend.set(on),
      loseAppendAcks: (on) => loseAck.set(on),
      failReads: (on) => {
        readsFail = on;
      },
      counters: () => ({ ...c }),
    },
  };
}
