import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { RolloutState } from '../../src/core/rollout/index.ts';
import { createRolloutClock } from '../../src/engine/rolloutClock.ts';
import { rolloutFleet } from '../support/rolloutFleet.ts';
import { until } from '../support/until.ts';

// A wave's timeout and the pause between waves run on the monotonic clock from the moment the
// driver read the rollout's last event; the wall clock stepping forward or back moves neither.

const at = (iso: string, revision: bigint) => ({ id: 'r', updatedAt: iso, revision }) as unknown as RolloutState;

test("the rollout's time runs on the monotonic clock from its last event, whatever the wall clock does", () => {
  let wall = Date.parse('2026-12-02T01:00:00Z');
  let mono = 5_000;
  const clock = createRolloutClock(
    () => wall,
    () => mono,
  );
  const s = at('2026-12-02T01:00:00.000Z', 3n);
  assert.equal(clock.nowMs(s), Date.parse('2026-12-02T01:00:00Z'));
  wall += 3 * 60_000; // a forward step of three minutes
  mono += 1_000;
  assert.equal(clock.nowMs(s) - Date.parse(s.updatedAt), 1_000, 'one second has passed, not three minutes');
  wall -= 13 * 60_000; // and back thirteen
  mono += 1_000;
  assert.equal(clock.nowMs(s) - Date.parse(s.updatedAt), 2_000);
  // A new event (a new revision): its own recorded time is the new anchor.
  const next = at(new Date(wall).toISOString(), 4n);
  mono += 500;
  assert.equal(clock.nowMs(next) - wall, 0);
});

test('an event first read after it was recorded (a restart, another engine) counts the wall time since, never less than none', () => {
  const wall = Date.parse('2026-12-02T01:00:00Z');
  const clock = createRolloutClock(
    () => wall,
    () => 0,
  );
  assert.equal(clock.nowMs(at('2026-12-02T00:59:00.000Z', 1n)), wall, 'a minute old: a minute has passed');
  const ahead = at('2026-12-02T01:13:00.000Z', 1n);
  const other = createRolloutClock(
    () => wall,
    () => 0,
  );
  assert.equal(other.nowMs(ahead), Date.parse(ahead.updatedAt), 'recorded "later" than now (a clock stepped back): no time has passed');
});

// The driver reads its own last event when it next decides, which on a loaded machine may come
// after a forward step: the step is not time that passed since the event was recorded.
test('an event recorded before a forward step and first read after it counts the monotonic time since, not the step', () => {
  let wall = Date.parse('2026-12-02T01:00:00Z');
  let mono = 5_000;
  const clock = createRolloutClock(
    () => wall,
    () => mono,
  );
  assert.equal(clock.nowMs(at('2026-12-02T01:00:00.000Z', 3n)), wall);
  wall += 500;
  mono += 500;
  const sent = at(new Date(wall).toISOString(), 4n); // recorded by this process half a second on
  wall += 3 * 60_000; // then the wall clock steps forward
  mono += 500;
  assert.equal(clock.nowMs(sent) - Date.parse(sent.updatedAt), 500, 'half a second since it was recorded, not three minutes');
  // An event recorded after the step carries the stepped time: the clock takes its scale, as before.
  const after = at(new Date(wall).toISOString(), 5n);
  mono += 100;
  assert.equal(clock.nowMs(after), wall);
});

test('a forward step of the wall clock does not time a wave out; the monotonic time does', async () => {
  const f = await rolloutFleet({ behaviour: { n2: 'silent' } });
  try {
    const id = await f.start({
      rollout: 'step-forward',
      selection: { kind: 'nodes', nodes: ['n1', 'n2', 'n3'] },
      waves: '2,100%',
      maxFailures: '1',
      waveTimeoutMs: 150_000,
    });
    await until('wave 1 sent', async () => (await f.rollout(id)).sends.size === 2);
    await f.settle();
    f.stepWall(3 * 60_000);
    f.tick(1_000);
    await f.settle();
    assert.equal((await f.rollout(id)).waves[0]?.completed, null, '1 s of the 150 s timeout has run, whatever the wall clock says');
    f.stepWall(-13 * 60_000);
    f.tick(148_000);
    await f.settle();
    assert.equal((await f.rollout(id)).waves[0]?.completed, null, '149 s have run');
    f.tick(1_001);
    await until('wave 1 to complete on its timeout', async () => (await f.rollout(id)).waves[0]?.completed !== null);
    // Behind at the timeout: 'timeout' if the node was heard within the grace then, 'silent' if not.
    assert.ok(['timeout', 'silent'].includes(String((await f.rollout(id)).waves[0]!.completed!.failures[0]?.reason)));
  } finally {
    await f.stop();
  }
});

test('the pause between waves runs on the monotonic clock: a backward step does not lengthen it, a forward one does not cut it', async () => {
  const f = await rolloutFleet();
  try {
    const id = await f.start({
      rollout: 'step-pause',
      selection: { kind: 'nodes', nodes: ['n1', 'n2', 'n3'] },
      waves: '1,100%',
      pauseMs: 60_000,
    });
    await until('wave 1 to complete', async () => (await f.rollout(id)).waves[0]?.completed != null);
    await f.settle();
    f.stepWall(10 * 60_000);
    await f.settle();
    assert.equal((await f.rollout(id)).current, 1, 'a forward step does not open wave 2');
    f.stepWall(-30 * 60_000);
    f.tick(60_001);
    await until('wave 2 to open after the pause', async () => (await f.rollout(id)).current === 2);
  } finally {
    await f.stop();
  }
});
