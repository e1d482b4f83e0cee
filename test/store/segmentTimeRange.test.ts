import assert from 'node:assert/strict';
import { test } from 'node:test';
import { eventTimeField, makeAliveSeen, makeNodeHeard, makeNodeSilent, streamOf } from '../../src/core/events/index.ts';
import type { ConvergeEvent, WithId } from '../../src/core/events/index.ts';
import type { ArchivedRow } from '../../src/store/archive/segment.ts';
import { timeRangeOf } from '../../src/store/archive/segmentTimes.ts';

// A segment's time range (src/store/archive/segmentTimes.ts) from the time the move read in SQL for
// rows of this version's shape, from the decoded data for older ones: the same range either way.

const t0 = Date.parse('2026-03-01T00:00:00.000Z');

function row(e: WithId<ConvergeEvent>, i: number, metadata = '{"v":2}', time?: string | null): ArchivedRow {
  const data = e.data as Record<string, string>;
  return {
    position: BigInt(i + 1),
    id: e.id,
    stream: streamOf(data['node']!),
    revision: BigInt(i),
    type: e.type,
    data: JSON.stringify(e.data),
    metadata,
    time: time === undefined ? data[(eventTimeField as Record<string, string>)[e.type]!]! : time,
    leaf: null,
  };
}

test("rows of this version: the range is their times' smallest and largest, whatever the metadata's spacing", () => {
  const events = [
    makeAliveSeen({ node: 'a' }, t0 + 5_000),
    makeNodeSilent('a', t0 - 90_000, t0 - 30_000, 60_000),
    makeNodeHeard('a', t0 + 9_000, t0 - 90_000),
  ];
  assert.deepEqual(timeRangeOf(events.map((e, i) => row(e, i))), { min: t0 - 30_000, max: t0 + 9_000 });
  // PostgreSQL gives jsonb metadata back as `{"v": 2}`.
  assert.deepEqual(timeRangeOf(events.map((e, i) => row(e, i, '{"v": 2}'))), { min: t0 - 30_000, max: t0 + 9_000 });
});

test('a row of an older shape is decoded, through its upcasters, as the fold reads it', () => {
  const old = row(makeAliveSeen({ node: 'a' }, t0 + 60_000), 1, '{"v":1}', '1999-01-01T00:00:00.000Z');
  assert.deepEqual(timeRangeOf([row(makeAliveSeen({ node: 'a' }, t0), 0), old]), { min: t0, max: t0 + 60_000 });
});

test('a row with no readable time: no range, so the segment is always opened', () => {
  const fine = row(makeAliveSeen({ node: 'a' }, t0), 0);
  assert.equal(timeRangeOf([fine, { ...fine, time: null, data: '{"node":"a"}' }]), null);
  assert.equal(timeRangeOf([fine, { ...fine, time: 'not a time' }]), null);
  assert.equal(timeRangeOf([]), null);
});
