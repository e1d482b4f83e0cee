import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import { makeNodeRetired } from '../../src/core/events/index.ts';
import type { EventStore, NewEvent, StatsCell } from '../../src/store/index.ts';

// EventStore.stats in the conformance suite (eventStore.contract.ts runs it for every adapter):
// the cells an append adds, by type and age, and their bytes equal to the stored JSON that
// readStored hands out. A store may hold other tests' events, so the test compares before and after.

const hour = 3_600_000;
const day = 24 * hour;
const now = new Date(Date.UTC(2026, 5, 30, 12, 0, 0));
const ago = (ms: number): string => new Date(now.getTime() - ms).toISOString();

const cellMap = (cells: readonly StatsCell[]): Map<string, StatsCell> => new Map(cells.map((c) => [`${c.type}/${c.age}`, c]));

/** after − before, cell by cell, without the cells that did not change. */
function added(before: readonly StatsCell[], after: readonly StatsCell[]): Record<string, { events: number; bytes: number }> {
  const b = cellMap(before);
  const out: Record<string, { events: number; bytes: number }> = {};
  for (const [key, c] of cellMap(after)) {
    const events = c.events - (b.get(key)?.events ?? 0);
    const bytes = c.bytes - (b.get(key)?.bytes ?? 0);
    if (events !== 0 || bytes !== 0) out[key] = { events, bytes };
  }
  return out;
}

export function storeStatsContract(withStore: (fn: (store: EventStore) => Promise<void>) => () => Promise<void>): void {
  void test(
    'stats count the appended events by type and by the age of their time, with the bytes of their stored data and metadata',
    withStore(async (store) => {
      if (store.stats === undefined) {
        assert.equal(store.kind, 'esdb', 'only EventStoreDB leaves stats out');
        return;
      }
      const node = `t${randomUUID().slice(0, 8)}`;
      const alive = (seenAt: string): NewEvent => ({ id: randomUUID(), type: 'AliveSeen', data: { node, seenAt } });
      const events: NewEvent[] = [
        alive(ago(hour)),
        alive(ago(2 * hour)),
        alive(ago(3 * day)),
        alive(ago(10 * day)),
        alive(ago(100 * day)),
        // On a bound: a day ago to the millisecond is within the last day.
        alive(ago(day)),
        makeNodeRetired(node, 5n, new Date(now.getTime() - 40 * day), 'gone'),
      ];
      const before = await store.stats({ now });
      const r = await store.append([{ stream: `node-${node}`, expected: 'no_stream', events }]);
      const heard: bigint[] = [];
      const after = await store.stats({ now, onProgress: (p) => heard.push(p) });
      const stored = (await store.readStored({ after: r.position! - BigInt(events.length), limit: events.length })).filter((s) =>
        events.some((e) => e.id === s.id),
      );
      assert.equal(stored.length, events.length);
      const bytesOf = (i: number): number => stored[i]!.data.length + stored[i]!.metadata.length;
      assert.deepEqual(added(before.cells, after.cells), {
        'AliveSeen/day': { events: 3, bytes: bytesOf(0) + bytesOf(1) + bytesOf(5) },
        'AliveSeen/week': { events: 1, bytes: bytesOf(2) },
        'AliveSeen/month': { events: 1, bytes: bytesOf(3) },
        'AliveSeen/older': { events: 1, bytes: bytesOf(4) },
        'NodeRetired/older': { events: 1, bytes: bytesOf(6) },
      });
      if (heard.length > 0) assert.ok(heard.at(-1)! >= r.position!, 'the last progress names the head');
      for (const s of after.storage) assert.ok(s.bytes > 0, `${s.name} has a size`);
      if (store.kind === 'postgres') assert.equal(after.storage[0]?.kind, 'table');
    }),
  );
}
