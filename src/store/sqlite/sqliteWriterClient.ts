import { MessageChannel } from 'node:worker_threads';
import { ConvergeError } from '../../core/errors.ts';
import type { EncodedWrite } from '../appendRules.ts';
import { startThread } from '../startThread.ts';
import { packWrites } from './sqliteWriter.ts';
import type { Written } from './sqliteWriter.ts';
import type { WriterError, WriterReply, WriterRequest, WriterThreadData } from './sqliteWriterThread.ts';

// The main thread's side of the SQLite writer thread (sqliteWriterThread.ts): requests posted in
// call order, each answered in that order once its transaction is committed and on disk.

export type WriterClient = Readonly<{
  /** `pipeline` 0: none; otherwise calls of one pipeline are refused untried once one of them failed. */
  append: (writes: readonly EncodedWrite[], pipeline: number) => Promise<Written>;
  setCheckpoint: (name: string, position: bigint) => Promise<void>;
  saveLastSeen: (engine: string, flushedAt: number, nodes: readonly (readonly [string, number])[]) => Promise<void>;
  /** Requests posted and not answered yet. */
  waiting: () => number;
  /** Answer what is queued, then close the thread's connection and end the thread. */
  close: () => Promise<void>;
}>;

const errorFrom = (e: WriterError): ConvergeError =>
  new ConvergeError(e.code, e.message, e.details === undefined ? undefined : { details: { ...e.details } });

const answered = (w: Written | null): Written => w!;

export function startWriterThread(options: Readonly<{ path: string; busyTimeoutMs: number; auditTree?: boolean }>): WriterClient {
  const { port1, port2 } = new MessageChannel();
  const worker = startThread(import.meta.url, 'sqliteWriterThread', {
    workerData: {
      path: options.path,
      busyTimeoutMs: options.busyTimeoutMs,
      auditTree: options.auditTree ?? true,
      port: port2,
    } satisfies WriterThreadData,
    transferList: [port2],
  });
  const waiting = new Map<number, Readonly<{ resolve: (r: Written | null) => void; reject: (err: Error) => void }>>();
  let seq = 0;
  /** Why no request can be answered any more (the thread failed to open, or ended). */
  let gone: ConvergeError | null = null;
  let exited = false;
  const exit = new Promise<void>((resolve) => worker.once('exit', () => resolve()));

  // Keeps the process alive only while a request waits: a store left open does not hold it.
  const idle = (): void => {
    if (waiting.size > 0) return;
    port1.unref();
    worker.unref();
  };
  idle();

  function failAll(err: ConvergeError): void {
    gone ??= err;
    const all = [...waiting.values()];
    waiting.clear();
    for (const w of all) w.reject(gone);
    idle();
  }

  port1.on('message', (reply: WriterReply) => {
    if ('fatal' in reply) return failAll(errorFrom(reply.error));
    const w = waiting.get(reply.id);
    if (w === undefined) return;
    waiting.delete(reply.id);
    if (reply.ok) w.resolve(reply.written);
    else w.reject(errorFrom(reply.error));
    idle();
  });
  worker.on('error', (err) =>
    failAll(new ConvergeError('CONVERGE_ERR_STORE_UNAVAILABLE', `the SQLite writer thread failed: ${err.message}`, { cause: err })),
  );
  worker.once('exit', (code) => {
    exited = true;
    failAll(new ConvergeError('CONVERGE_ERR_STORE_UNAVAILABLE', `the SQLite writer thread ended (exit code ${code})`));
  });

  function request(make: (id: number) => WriterRequest): Promise<Written | null> {
    if (gone !== null) return Promise.reject(gone);
    const id = ++seq;
    return new Promise<Written | null>((resolve, reject) => {
      waiting.set(id, { resolve, reject });
      port1.ref();
      worker.ref();
      port1.postMessage(make(id));
    });
  }

  return {
    // Not async, and its callback made outside: an async function's parameters live until it
    // returns, and a closure made beside `(id) => …` holds what that one captures. `writes` (every
    // event's JSON) is wanted until it is packed and posted, not for the commit's round trip.
    append: (writes, pipeline) => request((id) => ({ op: 'append', id, pipeline, writes: packWrites(writes) })).then(answered),
    setCheckpoint: async (name, position) => {
      await request((id) => ({ op: 'checkpoint', id, name, position }));
    },
    saveLastSeen: async (engine, flushedAt, nodes) => {
      await request((id) => ({ op: 'lastSeen', id, engine, flushedAt, nodes }));
    },
    waiting: () => waiting.size,
    close: async () => {
      if (!exited && gone === null) await request((id) => ({ op: 'close', id })).catch(() => undefined);
      // A thread that answered its close ends by itself; one that failed is ended here.
      if (!exited && gone !== null) await worker.terminate();
      else if (!exited) {
        worker.ref();
        await exit;
      }
      port1.close();
    },
  };
}
