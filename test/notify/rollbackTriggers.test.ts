import assert from 'node:assert/strict';
import { test } from 'node:test';
import { makeRolloutEvent, rolloutStreamOf } from '../../src/core/events/index.ts';
import type { EventStore } from '../../src/store/index.ts';
import { historyInStore } from '../support/history.ts';
import { until } from '../support/until.ts';
import { rig } from './rig.ts';

// A rollback's start and end reach a real HTTP receiver as rollout triggers do, and the
// destination's filters (rollout, triggers, minSeverity) pick them as they pick the others.

type Received = { trigger: string; rollout: string | null; facts: Record<string, unknown> };
const notes = (r: Awaited<ReturnType<typeof rig>>['receiver']): Received[] =>
  r.received.flatMap((m) =>
    (m.json.data.notifications as unknown as Received[]).map((n) => ({ trigger: n.trigger, rollout: n.rollout, facts: n.facts })),
  );

/** r1 rolled back with a failure, r2 rolled back cleanly, then a halt of r3 to mark the end. */
async function rollbacks(store: EventStore): Promise<void> {
  const at = historyInStore(store).now().toISOString();
  const failure = { node: 'n2', reason: 'refused' as const, detail: 'no' };
  const append = (rollout: string, events: ReturnType<typeof makeRolloutEvent>[]) =>
    store.append([{ stream: rolloutStreamOf(rollout), expected: 'any', events }]);
  await append('r1', [
    makeRolloutEvent('RollbackStarted', { rollout: 'r1', scope: 'all', wave: 2, by: 'engine', reason: 'halted in wave 2', at }),
    makeRolloutEvent('RollbackCompleted', { rollout: 'r1', at, done: 3, failed: 1, skipped: 1, failures: [failure] }),
  ]);
  await append('r2', [
    makeRolloutEvent('RollbackStarted', { rollout: 'r2', scope: 'wave', wave: 1, by: 'alice', reason: 'bad canary', at }),
    makeRolloutEvent('RollbackCompleted', { rollout: 'r2', at, done: 1, failed: 0, skipped: 0, failures: [] }),
  ]);
  await append('r3', [
    makeRolloutEvent('RolloutHalted', { rollout: 'r3', wave: 1, at, failures: 1, maxFailures: 0, failed: [] }, { revision: 3n }),
  ]);
}

test('a rollback started, failed and completed arrive as rollout notifications with their facts', async () => {
  const { store, receiver } = await rig();
  await rollbacks(store);
  await until('five notifications', () => notes(receiver).length >= 5);
  const got = notes(receiver);
  assert.deepEqual(
    got.map((n) => `${n.trigger}:${n.rollout}`),
    [
      'rollout.rollback.started:r1',
      'rollout.rollback.failed:r1',
      'rollout.rollback.started:r2',
      'rollout.rollback.completed:r2',
      'rollout.halted:r3',
    ],
  );
  assert.deepEqual(got[0]!.facts, { scope: 'all', wave: 2, by: 'engine', reason: 'halted in wave 2' });
  assert.deepEqual(got[1]!.facts, { done: 3, failed: 1, skipped: 1, failures: [{ node: 'n2', reason: 'refused', detail: 'no' }] });
  assert.deepEqual(got[3]!.facts, { done: 1, failed: 0, skipped: 0, failures: [] });
  const types = receiver.received.map((m) => (JSON.parse(m.body) as { type: string }).type);
  assert.ok(types.includes('io.converge.rollout.rollback.failed'), types.join(' '));
  const severities = receiver.received.map((m) => (JSON.parse(m.body) as { data: { severity: string } }).data.severity);
  assert.deepEqual(severities, ['warning', 'critical', 'warning', 'info', 'critical']);
});

test('filters pick rollback notifications by rollout and trigger, as for the other rollout triggers', async () => {
  const { store, receiver } = await rig({
    filter: { rollout: 'r2', triggers: ['rollout.rollback.started', 'rollout.rollback.completed', 'rollout.rollback.failed'] },
  });
  await rollbacks(store);
  await until('r2 rollback notifications', () => notes(receiver).length >= 2);
  // r1's come before r2's in the store and order is kept: had they passed the filter they would be first.
  assert.deepEqual(
    notes(receiver).map((n) => `${n.trigger}:${n.rollout}`),
    ['rollout.rollback.started:r2', 'rollout.rollback.completed:r2'],
  );
});

test('minSeverity critical takes a failed rollback and leaves a clean one', async () => {
  const { store, receiver } = await rig({ filter: { minSeverity: 'critical' } });
  await rollbacks(store);
  await until('the halt that comes last', () => notes(receiver).some((n) => n.trigger === 'rollout.halted'));
  assert.deepEqual(
    notes(receiver).map((n) => `${n.trigger}:${n.rollout}`),
    ['rollout.rollback.failed:r1', 'rollout.halted:r3'],
  );
});
