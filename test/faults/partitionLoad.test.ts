import assert from 'node:assert/strict';
import { test } from 'node:test';
import { risesWithin, writtenAt } from './partitionLoad.ts';

// The partition scenario's judgement of what A issued after B took the relay lease
// (test/faults/partitionScenario.ts): a rise of a counter is known only to lie between two reads.

test('a rise first seen after the heal, by a read that waited through the cut, is not placed after B took the lease', () => {
  const taken = 10_500;
  // The CI run's shape: the read before was sent before the cut (0), the next answered after the heal (10,700).
  const seenLate = { after: -250, by: 10_900 };
  assert.deepEqual(risesWithin([seenLate], taken, Infinity), []);
});

test('a rise between two reads sent after B took the lease counts, up to A taking the lease again', () => {
  const taken = 10_500;
  const rise = { after: 10_600, by: 11_300 };
  assert.deepEqual(risesWithin([rise], taken, Infinity), [rise]);
  assert.deepEqual(risesWithin([rise], taken, 12_000), [rise]);
  // Seen only after A took it again: it may have been A's first publish as the holder.
  assert.deepEqual(risesWithin([rise], taken, 11_000), []);
});

test("a log line is placed by the engine's own stamp, not by when it reached the test", () => {
  const raw = JSON.stringify({ level: 30, time: '2026-12-03T16:00:00.250Z', msg: 'relay lease taken: this engine publishes declarations' });
  assert.equal(
    writtenAt({ at: Date.parse('2026-12-03T16:00:02Z'), msg: 'relay lease taken', raw }),
    Date.parse('2026-12-03T16:00:00.250Z'),
  );
  assert.equal(writtenAt({ at: 5, msg: 'not json', raw: 'not json' }), 5);
});
