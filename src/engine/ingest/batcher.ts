import { nextTurn } from '../../turnBudget.ts';
import type { Pending } from './committer.ts';

// Deliveries parsed and waiting for an append, gathered into batches: one store call per batch,
// and only full batches while more keep coming. Each append is one commit and one fsync, and
// writing whatever had trickled in behind a full batch made many more appends than batches (the
// largest cost in bench/ingest.ts). A remainder waits at most `flushMs`. One flush loop at a time
// writes the batches, one after another, with an event-loop turn between them.

export type Batcher = Readonly<{
  /** Queue a parsed delivery for the next batch. */
  add: (p: Pending) => void;
  /** Write everything queued, partial batch included; the running flush, or null if nothing is queued. */
  flushAll: () => Promise<void> | null;
  /** Deliveries queued, not yet in a batch being written. */
  size: () => number;
}>;

export type BatcherOptions = Readonly<{
  /** Most deliveries per batch. */
  batchSize: number;
  /** Most body bytes per batch (but at least one delivery). */
  batchBytes: number;
  /** How long a partial batch waits for company. */
  flushMs: number;
  /** Write a batch; false: stopped with the store down, the batch left unacked (the flush stops there). */
  write: (batch: readonly Pending[]) => Promise<boolean>;
  /** Aborted at stop: no flush is started again on its own. */
  signal: AbortSignal;
}>;

/** A liveness transition of the engine's own has no delivery, and is small. */
const bytesOf = (p: Pending): number => (p.delivery === null ? 64 : p.delivery.body.length);

export function createBatcher(options: BatcherOptions): Batcher {
  const { batchSize, batchBytes, flushMs, write, signal } = options;
  let pending: Pending[] = [];
  let pendingBytes = 0;
  let timer: NodeJS.Timeout | null = null;
  let flushing: Promise<void> | null = null;

  function schedule(): void {
    if (flushing !== null) return; // the running flush loop takes whatever has arrived
    if (pending.length >= batchSize || pendingBytes >= batchBytes) kick(false);
    else if (timer === null) timer = setTimeout(kick, flushMs, true);
  }

  /** Write what is pending: full batches only, or everything once a partial batch has waited flushMs (or we stop). */
  function kick(partial: boolean): void {
    if (timer !== null) clearTimeout(timer);
    timer = null;
    if (flushing !== null) return;
    flushing = drain(partial).finally(() => {
      flushing = null;
      if (pending.length > 0 && !signal.aborted) schedule();
    });
  }

  async function drain(partial: boolean): Promise<void> {
    while (pending.length >= batchSize || pendingBytes >= batchBytes || (partial && pending.length > 0)) {
      const n = batchLength();
      const batch = pending.length === n ? pending : pending.slice(0, n);
      pending = pending.length === n ? [] : pending.slice(n);
      for (const p of batch) pendingBytes -= bytesOf(p);
      // false: stopped with the store down; the rest stays unacked and the broker redelivers it to whoever is next.
      if (!(await write(batch))) return;
      // An append settles as a microtask: without a turn between batches a backlog is written
      // in one event-loop turn, deliveries and timers waiting behind it.
      await nextTurn();
    }
  }

  /** Deliveries in the next batch: up to batchSize, and no more body bytes than batchBytes (but at least one). */
  function batchLength(): number {
    const most = Math.min(batchSize, pending.length);
    let bytes = 0;
    for (let i = 0; i < most; i++) {
      bytes += bytesOf(pending[i]!);
      if (bytes >= batchBytes) return i + 1;
    }
    return most;
  }

  return {
    add: (p) => {
      pending.push(p);
      pendingBytes += bytesOf(p);
      schedule();
    },
    flushAll: () => {
      kick(true);
      return flushing;
    },
    size: () => pending.length,
  };
}
