import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createLivenessRecorder } from '../../src/engine/liveness/recorder.ts';

// The sweep makes a wave's silences a slice of the turn at a time: a call ended early by
// `enough` leaves the rest to the next call, and no node is silenced twice or skipped.

test('silences ended early by `enough` are answered by the next calls, each node once', () => {
  const recorder = createLivenessRecorder({ graceMs: 100 });
  for (let i = 0; i < 10; i++) recorder.heard(`n-${i}`, 1_000, 0);
  recorder.heard('late', 1_150, 150);
  const silenced: string[] = [];
  let calls = 0;
  for (;;) {
    let made = 0;
    const events = recorder.silences(200, 1_200, undefined, () => ++made >= 3);
    calls++;
    silenced.push(...events.map((e) => e.data.node));
    if (events.length === 0) break;
  }
  assert.deepEqual(
    silenced,
    Array.from({ length: 10 }, (_, i) => `n-${i}`),
  );
  assert.equal(calls, 5, 'three a call, the last call finds none left');
  assert.equal(recorder.due(200), false);
});
