import type { ConvergeEvent, Recorded } from '../../core/events/index.ts';
import { recorded } from '../appendRules.ts';
import type { StreamWrite } from '../port.ts';
import type { Written } from './sqliteWriter.ts';

// Events this handle appended, newest last (positions increasing), kept a while so this
// process's live subscriptions take them as appended instead of reading them back: the
// projection runner had read and decoded (JSON.parse + zod) every event ingest had just written.
// Only after a commit: a rolled-back position may be handed out again. What another process or
// handle appended is read from the file as before, and so is anything older than the window (a
// subscriber catching up).

export type AppendTail = Readonly<{
  /** Up to `limit` consecutive events after `after`; null unless `after + 1` is held. */
  after: (after: bigint, limit: number) => Recorded[] | null;
  /**
   * Events of `types` after `after`, up to `limit`; null unless the tail holds every position from
   * `after + 1` to the head: only while the tail's newest event is the store's newest (no other
   * connection, process or writer of this one has appended since). The relay and the rollout
   * driver follow rare types, and were woken by every append to scan in SQL the rows it had just written.
   */
  afterOfTypes: (after: bigint, limit: number, types: ReadonlySet<string>) => Recorded[] | null;
  /**
   * What an append wrote goes on the tail, in position order (appends are answered in the order
   * they committed), as the events the caller passed with their positions and revisions.
   */
  add: (writes: readonly StreamWrite[], written: Written) => void;
  /** The newest position held (null: none). */
  newest: () => bigint | null;
}>;

const tailLimit = 4_096;

/** `head`: the store's newest position, as the file has it. */
export function createAppendTail(head: () => bigint | null): AppendTail {
  let tail: Recorded[] = [];

  function after(after: bigint, limit: number): Recorded[] | null {
    const want = after + 1n;
    const first = tail[0];
    if (first === undefined || want < first.position || want > tail[tail.length - 1]!.position) return null;
    let lo = 0;
    let hi = tail.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (tail[mid]!.position < want) lo = mid + 1;
      else hi = mid;
    }
    if (tail[lo]!.position !== want) return null;
    const out: Recorded[] = [];
    // Only a run of consecutive positions: a gap is another writer's event, read from the file.
    for (let i = lo, next = want; i < tail.length && out.length < limit && tail[i]!.position === next; i++, next++) out.push(tail[i]!);
    return out;
  }

  function afterOfTypes(after: bigint, limit: number, types: ReadonlySet<string>): Recorded[] | null {
    const first = tail[0];
    if (first === undefined || after + 1n < first.position) return null;
    const newest = tail[tail.length - 1]!.position;
    if (head() !== newest) return null;
    if (after >= newest) return [];
    let i = Number(after + 1n - first.position);
    // Consecutive positions only from there to the newest: a gap is another writer's event.
    if (tail[i]?.position !== after + 1n || newest - tail[i]!.position !== BigInt(tail.length - 1 - i)) return null;
    const out: Recorded[] = [];
    for (; i < tail.length && out.length < limit; i++) if (types.has(tail[i]!.type)) out.push(tail[i]!);
    return out;
  }

  function add(writes: readonly StreamWrite[], written: Written): void {
    if (written.position === null) return;
    // Pushed in place, and past twice `tailLimit` cut back to the newest `tailLimit` held before
    // this append and all of its events: a new array per append (concat) copied the whole window
    // each time, thousands of slots a batch.
    const before = tail.length;
    let k = 0;
    writes.forEach((w, i) => {
      let revision = written.nextExpected[i]! - BigInt(written.written[i]!);
      for (const e of w.events) {
        const position = written.positions[k++]!;
        if (position === 0n) continue;
        revision++;
        tail.push(recorded({ type: e.type, data: e.data } as ConvergeEvent, e.id, w.stream, revision, position));
      }
    });
    if (tail.length > tailLimit * 2) tail = tail.slice(Math.max(0, before - tailLimit));
  }

  const newest = (): bigint | null => (tail.length === 0 ? null : tail[tail.length - 1]!.position);
  return { after, afterOfTypes, add, newest };
}
