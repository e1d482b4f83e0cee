// A binary min-heap of nodes by the monotonic time they were last heard, for the liveness sweep
// (recorder.ts): the sweep looks only at the nodes at its top, whose silence may be due, not at
// every node it holds. Ties go in the order pushed, so a wave seeded at once is silenced in order.

export type Queued<T> = { at: number; seq: number; item: T };

export type DueQueue<T> = Readonly<{
  push: (at: number, item: T) => void;
  /** The entry with the least `at` (the earliest pushed of equals), or undefined. */
  peek: () => Queued<T> | undefined;
  /** Remove the top. */
  pop: () => Queued<T> | undefined;
  /** Move the top to `at` (later than it was), where it sorts among the others. */
  retime: (at: number) => void;
  size: () => number;
}>;

export function createDueQueue<T>(): DueQueue<T> {
  const heap: Queued<T>[] = [];
  let seq = 0;
  const before = (a: Queued<T>, b: Queued<T>): boolean => a.at < b.at || (a.at === b.at && a.seq < b.seq);

  function up(i: number): void {
    const x = heap[i]!;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!before(x, heap[p]!)) break;
      heap[i] = heap[p]!;
      i = p;
    }
    heap[i] = x;
  }

  function down(i: number): void {
    const x = heap[i]!;
    const n = heap.length;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const c = r < n && before(heap[r]!, heap[l]!) ? r : l;
      if (!before(heap[c]!, x)) break;
      heap[i] = heap[c]!;
      i = c;
    }
    heap[i] = x;
  }

  return {
    push(at, item) {
      heap.push({ at, seq: seq++, item });
      up(heap.length - 1);
    },
    peek: () => heap[0],
    pop() {
      const top = heap[0];
      const last = heap.pop();
      if (heap.length > 0 && last !== undefined) {
        heap[0] = last;
        down(0);
      }
      return top;
    },
    retime(at) {
      const top = heap[0];
      if (top === undefined) return;
      top.at = at;
      top.seq = seq++;
      down(0);
    },
    size: () => heap.length,
  };
}
