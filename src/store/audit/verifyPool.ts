import { availableParallelism } from 'node:os';
import { checkRows } from '../../core/audit/verifyLog.ts';
import type { CheckedPage, Finding, StoredLeaf } from '../../core/audit/verifyLog.ts';
import { ConvergeError } from '../../core/errors.ts';
import { startThread } from '../startThread.ts';
import type { VerifyRangeReply, VerifyRangeRequest, VerifyThreadData } from './verifyThread.ts';

// `converge audit verify` on every core (docs/audit.md#verifying-a-store): reading the rows and
// recomputing their leaves is most of the walk and needs no row before it, so threads of their own
// (verifyThread.ts) do it over ranges of positions, while this thread takes their pages in order
// for what does: the gaps between rows, the tree and the head (verifyLog.ts).

export type VerifyPoolOptions = Readonly<{
  /** The store's URL: each thread opens a connection of its own. */
  url: string;
  /** The newest position when the walk starts: ranges cover up to it, and `readTail` reads what was appended since. */
  last: bigint | null;
  /** Rows appended after `last`, read on this thread. */
  readTail: (after: bigint | null, limit: number) => Promise<readonly StoredLeaf[]>;
  threads?: number;
  /** Positions per range. */
  rangeSize?: number;
}>;

const pageOf = (reply: Extract<VerifyRangeReply, { positions: BigInt64Array }>): CheckedPage => ({
  positions: reply.positions,
  leaves: reply.leaves,
  bad:
    reply.bad === null
      ? null
      : {
          index: reply.bad.index,
          finding: { kind: reply.bad.kind as Finding['kind'], position: reply.bad.position, message: reply.bad.message },
        },
});

/** Checked pages of the whole log in position order, ranges read and checked on `threads` threads at once. */
export async function* pooledCheckedPages(options: VerifyPoolOptions): AsyncGenerator<CheckedPage> {
  const threads = Math.max(1, options.threads ?? availableParallelism());
  const rangeSize = options.rangeSize ?? 4_096;
  const last = options.last ?? 0n;
  const workers = Array.from({ length: threads }, () =>
    startThread(import.meta.url, 'verifyThread', { workerData: { url: options.url } satisfies VerifyThreadData }),
  );
  const waiting = new Map<number, (reply: VerifyRangeReply) => void>();
  let failure: Error | null = null;
  for (const w of workers) {
    w.on('message', (reply: VerifyRangeReply) => {
      waiting.get(reply.id)?.(reply);
      waiting.delete(reply.id);
    });
    w.on('error', (err) => {
      failure = err;
      for (const settle of waiting.values()) settle({ id: -1, failed: err.message });
      waiting.clear();
    });
  }
  const ask = (id: number): Promise<VerifyRangeReply> => {
    const after = BigInt(id) * BigInt(rangeSize);
    // The last range ends at `last`: rows past it are the tail's, read below.
    const end = after + BigInt(rangeSize) < last ? after + BigInt(rangeSize) : last;
    const request: VerifyRangeRequest = { id, after, end, limit: rangeSize };
    return new Promise((resolve) => {
      if (failure !== null) return resolve({ id, failed: failure.message });
      waiting.set(id, resolve);
      workers[id % threads]!.postMessage(request);
    });
  };
  const ranges = Number((last + BigInt(rangeSize) - 1n) / BigInt(rangeSize));
  // Two ranges ahead per thread: each has the next one queued when it posts a page.
  const inFlight: Promise<VerifyRangeReply>[] = [];
  let next = 0;
  try {
    while (next < ranges && inFlight.length < threads * 2) inFlight.push(ask(next++));
    while (inFlight.length > 0) {
      const reply = await inFlight.shift()!;
      if (next < ranges) inFlight.push(ask(next++));
      if ('failed' in reply)
        throw new ConvergeError('CONVERGE_ERR_STORE_UNAVAILABLE', `audit verify: a reading thread failed: ${reply.failed}`);
      const page = pageOf(reply);
      if (page.positions.length > 0) yield page;
      if (page.bad !== null) return;
    }
  } finally {
    for (const w of workers) void w.terminate();
  }
  // What was appended while the ranges were read, on this thread.
  let after: bigint | null = options.last;
  for (;;) {
    const rows = await options.readTail(after, rangeSize);
    if (rows.length === 0) return;
    const page = checkRows(rows);
    yield page;
    if (page.bad !== null) return;
    after = rows.at(-1)!.position;
  }
}
