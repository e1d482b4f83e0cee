import { parentPort, workerData } from 'node:worker_threads';
import { checkRows } from '../../core/audit/verifyLog.ts';
import { openEventStore } from '../index.ts';

// One thread of `converge audit verify`'s pool (verifyPool.ts): its own connection to the store,
// asked for ranges of positions; each range's rows are read, their leaves recomputed and checked
// against the hashes stored beside them, and the page posted back with its leaves transferred.

export type VerifyThreadData = Readonly<{ url: string }>;
export type VerifyRangeRequest = Readonly<{ id: number; after: bigint; end: bigint; limit: number }>;
export type VerifyRangeReply =
  | Readonly<{
      id: number;
      positions: BigInt64Array;
      leaves: Uint8Array;
      bad: Readonly<{ index: number; kind: string; position: bigint; message: string }> | null;
    }>
  | Readonly<{ id: number; failed: string }>;

const port = parentPort;
if (port === null) throw new Error('verifyThread.ts runs as a worker thread');
const { url } = workerData as VerifyThreadData;
// The listener is attached at once: ranges posted while the store opens wait on it, not in the port.
const opened = openEventStore(url);
port.on('message', (m: VerifyRangeRequest | 'close') => {
  if (m === 'close') {
    void opened.then((store) => store.close()).finally(() => port.close());
    return;
  }
  void (async () => {
    try {
      const store = await opened;
      const rows = (await store.readStored({ after: m.after, limit: m.limit })).filter((r) => r.position <= m.end);
      const page = checkRows(rows);
      const positions = BigInt64Array.from(page.positions as readonly bigint[]);
      const leaves = new Uint8Array(page.leaves);
      const bad = page.bad === null ? null : { index: page.bad.index, ...page.bad.finding };
      port.postMessage({ id: m.id, positions, leaves, bad } satisfies VerifyRangeReply, [positions.buffer, leaves.buffer]);
    } catch (err) {
      port.postMessage({ id: m.id, failed: err instanceof Error ? err.message : String(err) } satisfies VerifyRangeReply);
    }
  })();
});
