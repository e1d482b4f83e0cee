// The SQLite store's append tail (src/store/sqlite/sqliteTail.ts): the events it holds for this
// process's subscriptions, as appends of every size go on it and its window is cut back.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import type { StreamWrite } from '../../src/store/index.ts';
import { createAppendTail } from '../../src/store/sqlite/sqliteTail.ts';
import type { Written } from '../../src/store/sqlite/sqliteWriter.ts';

const limit = 4_096;

/** One append of `n` events to one stream, the first at `from`. */
function append(from: bigint, n: number): { writes: StreamWrite[]; written: Written } {
  const events = Array.from({ length: n }, (_, i) => ({ id: `e${from + BigInt(i)}`, type: 'AliveSeen', data: { node: 'a', seenAt: '' } }));
  const positions = BigInt64Array.from(events, (_, i) => from + BigInt(i));
  return {
    writes: [{ stream: 'node-a', expected: 'any', events } as unknown as StreamWrite],
    written: { position: from + BigInt(n - 1), nextExpected: BigInt64Array.of(from + BigInt(n - 1)), written: Int32Array.of(n), positions },
  };
}

test('the tail holds the newest window of what was appended: past twice its size, the newest half and the last append', () => {
  fc.assert(
    fc.property(fc.array(fc.integer({ min: 1, max: 3_000 }), { minLength: 1, maxLength: 12 }), (sizes) => {
      const tail = createAppendTail(() => null);
      // The window as it was kept before the tail was pushed in place: the newest `limit` held
      // before an append that would take it past twice that, then all of that append.
      let first = 1n;
      let held = 0;
      let next = 1n;
      for (const n of sizes) {
        const { writes, written } = append(next, n);
        tail.add(writes, written);
        if (held + n > limit * 2) {
          first += BigInt(Math.max(0, held - limit));
          held = Math.min(held, limit);
        }
        held += n;
        next += BigInt(n);
        assert.equal(tail.newest(), next - 1n);
        const all = tail.after(first - 1n, Number.MAX_SAFE_INTEGER);
        assert.deepEqual(
          all?.map((r) => r.position),
          Array.from({ length: held }, (_, i) => first + BigInt(i)),
        );
        if (first > 1n) assert.equal(tail.after(first - 2n, 1), null, 'an event older than the window is read from the file');
      }
    }),
    { numRuns: 200 },
  );
});
