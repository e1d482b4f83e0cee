import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { digestLength, duration, shortDigest, time, timeoutHeldText, timeTicks, timeTickSteps } from '../../web/src/format.ts';

// The dashboard's words and numbers, without a browser: what the pages print comes from these.

describe('dashboard format', () => {
  test('a duration is never negative: a state entered after the last clock tick reads 0 ms', () => {
    assert.equal(duration(-221), '0 ms');
    assert.equal(duration(-5_000), '0 ms');
    assert.equal(duration(1_500), '1.5 s');
    assert.equal(duration(null), '—');
  });

  test('every digest is shown at one length, 12 characters', () => {
    const d = 'a'.repeat(10) + 'b'.repeat(54);
    assert.equal(digestLength, 12);
    assert.equal(shortDigest(d), 'aaaaaaaaaabb');
    assert.equal(shortDigest(null), '—');
  });

  test('time ticks are HH:MM:SS with the ISO date on the first tick and on a new day', () => {
    const at = (y: number, mo: number, d: number, h: number, mi: number, s: number): number => new Date(y, mo - 1, d, h, mi, s).getTime();
    assert.deepEqual(timeTicks([at(2026, 11, 30, 23, 59, 30), at(2026, 11, 30, 23, 59, 45), at(2026, 12, 1, 0, 0, 0)]), [
      '2026-11-30\n23:59:30',
      '23:59:45',
      '2026-12-01\n00:00:00',
    ]);
    for (const label of timeTicks([at(2026, 11, 30, 2, 17, 21)]).flatMap((l) => l.split('\n')))
      assert.match(label, /^(\d{4}-\d{2}-\d{2}|\d{2}:\d{2}:\d{2})$/);
  });

  test('time ticks step by whole seconds at least, so no tick reads ":21.500"', () => {
    assert.ok(timeTickSteps.every((s) => Number.isInteger(s) && s >= 1));
    assert.deepEqual(
      [...timeTickSteps].sort((a, b) => a - b),
      [...timeTickSteps],
    );
  });

  test('a held timeout reads in one line: why nothing is decided, and until when it waits at least', () => {
    const since = '2026-11-30T13:09:45.310Z';
    assert.equal(timeoutHeldText(null), null);
    assert.equal(timeoutHeldText(undefined), null);
    assert.equal(
      timeoutHeldText({ since, until: null, reason: 'notObserving', graceMs: 60_000 }),
      `Timeout held since ${time(since)}: no report can arrive; decided ${duration(60_000)} after an engine observes again`,
    );
    const until = '2026-11-30T13:20:00.000Z';
    assert.equal(
      timeoutHeldText({ since, until, reason: 'grace', graceMs: 60_000 }),
      `Timeout held until ${time(until)} at least: observed again, the reports queued meanwhile still arriving`,
    );
  });
});
