import assert from 'node:assert/strict';
import { test } from 'node:test';
import { abortRollout, newRolloutId, pauseRollout, readRollout, resumeRollout, startRollout } from '../../src/engine/rolloutCommands.ts';
import type { StartRolloutInput } from '../../src/engine/rolloutCommands.ts';
import { isConvergeError } from '../../src/core/errors.ts';
import type { ErrorCode } from '../../src/core/errors.ts';
import { makeRolloutEvent, rolloutIdPattern, rolloutStreamOf } from '../../src/core/events/index.ts';
import type { NodeState } from '../../projections/index.ts';
import { specDigestOf } from '../../src/core/declaration/index.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';

// The operator's commands on a rollout. Each records one decision in the rollout's
// stream at the revision it read, and refuses, with a code of its own, what makes no sense.

const fleet = (n: number, prefix = 'n-'): Pick<NodeState, 'node' | 'sent'>[] =>
  Array.from({ length: n }, (_, i) => ({ node: `${prefix}${String(i).padStart(4, '0')}`, sent: null }));

function setup(nodes = fleet(20)) {
  const store = createMemoryEventStore();
  let clock = Date.parse('2026-11-30T14:00:00Z');
  const deps = { store, now: () => new Date(clock), nodeStates: () => nodes };
  return { store, deps, tick: (ms: number) => (clock += ms) };
}

const input = (over: Partial<StartRolloutInput> = {}): StartRolloutInput => ({
  rollout: 'r1',
  resources: [{ id: 'web', image: 'nginx:1.27' }],
  selection: { kind: 'all' },
  waves: '1,10%,50%,100%',
  maxFailures: '1',
  waveTimeoutMs: 60_000,
  startedBy: 'alice',
  ...over,
});

const rejects = async (p: Promise<unknown>, code: ErrorCode, message: RegExp): Promise<void> => {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(isConvergeError(err, code), `expected ${code}, got ${String(err)}`);
    assert.match((err as Error).message, message);
    return true;
  });
};

test('start records the plan and every target in one append; the fold reads them back', async () => {
  const { store, deps } = setup(fleet(2_500));
  const r = await startRollout(deps, input({ waves: '1,10%,50%', maxFailures: '1%', pauseMs: 5_000 }));
  assert.deepEqual(r, { rollout: 'r1', targets: 2_500, waves: [1, 250, 1_250, 2_500] });
  const events = await store.readStream(rolloutStreamOf('r1'));
  assert.deepEqual(
    events.map((e) => e.type),
    ['RolloutStarted', 'RolloutNodesListed', 'RolloutNodesListed', 'RolloutNodesListed'],
  );
  assert.equal(new Set(events.map((e) => e.position)).size, 4);
  const s = await readRollout(store, 'r1');
  assert.ok(s !== null);
  assert.equal(s.status, 'running');
  assert.equal(s.targets.length, 2_500);
  assert.equal(s.targets[0], 'n-0000');
  assert.equal(s.started.maxFailures, 25);
  assert.equal(s.started.pauseMs, 5_000);
  assert.equal(s.started.specDigest, specDigestOf([{ id: 'web', image: 'nginx:1.27' }]));
  assert.deepEqual(s.started.asGiven, { waves: '1,10%,50%', maxFailures: '1%' });
  assert.equal(s.started.startedBy, 'alice');
  assert.equal(s.started.startedAt, '2026-11-30T14:00:00.000Z');
});

test('an explicit node list keeps its order; the other selections come from the node states', async () => {
  const nodes = [...fleet(3, 'a-'), ...fleet(2, 'b-')];
  nodes[1] = { node: 'a-0001', sent: { specDigest: 'f'.repeat(64) } as NodeState['sent'] };
  const { store, deps } = setup(nodes);
  await startRollout(deps, input({ rollout: 'list', selection: { kind: 'nodes', nodes: ['zz', 'a-0002', 'zz'] } }));
  assert.deepEqual((await readRollout(store, 'list'))?.targets, ['zz', 'a-0002']);
  assert.deepEqual((await readRollout(store, 'list'))?.started.selection, { kind: 'nodes' });
  await startRollout(deps, input({ rollout: 'pre', selection: { kind: 'prefix', prefix: 'b-' } }));
  assert.deepEqual((await readRollout(store, 'pre'))?.targets, ['b-0000', 'b-0001']);
  await startRollout(deps, input({ rollout: 'spec', selection: { kind: 'spec', specDigest: 'f'.repeat(64) } }));
  assert.deepEqual((await readRollout(store, 'spec'))?.targets, ['a-0001']);
});

test('a long node list is checked and deduplicated a slice of the turn at a time, the event loop free between slices', async () => {
  const { store, deps } = setup([]);
  const named = fleet(3_000, 'x-').map((s) => s.node);
  // Repeats, first seen early, named again at the end: the first place is kept.
  const nodes = [...named, ...named.slice(0, 10)];
  // Counts the turns the loop gets while the start runs: a slice of 0 ms gives it one after each slice.
  let turns = 0;
  let starting = true;
  const tick = (): void => {
    if (!starting) return;
    turns++;
    setImmediate(tick);
  };
  setImmediate(tick);
  const r = await startRollout({ ...deps, sliceMs: 0 }, input({ rollout: 'long', selection: { kind: 'nodes', nodes } }));
  starting = false;
  assert.equal(r.targets, 3_000);
  assert.deepEqual((await readRollout(store, 'long'))?.targets, named);
  assert.ok(turns >= 2, `the loop had ${turns} turn(s) while 3,000 nodes were checked`);
  // A bad id past the first slices is still refused, and nothing is written.
  await rejects(
    startRollout({ ...deps, sliceMs: 0 }, input({ rollout: 'bad', selection: { kind: 'nodes', nodes: [...named, 'Not A Node'] } })),
    'CONVERGE_ERR_NODE_ID_INVALID',
    /./,
  );
  assert.equal(await readRollout(store, 'bad'), null);
});

test('without an id, start makes one that sorts by time and fits a stream name', async () => {
  const { deps } = setup();
  const { rollout: _given, ...rest } = input();
  const { rollout } = await startRollout(deps, rest);
  assert.match(rollout, /^20261130-140000-[0-9a-f]{6}$/);
  assert.match(newRolloutId(new Date()), rolloutIdPattern);
  assert.notEqual(newRolloutId(new Date(0)), newRolloutId(new Date(0)));
});

test('start refuses a plan that cannot run, with CONVERGE_ERR_ROLLOUT_PLAN and a reason, and writes nothing', async () => {
  const { store, deps } = setup();
  await rejects(startRollout(deps, input({ waves: '1,,2' })), 'CONVERGE_ERR_ROLLOUT_PLAN', /separated by commas/);
  await rejects(startRollout(deps, input({ waves: '150%' })), 'CONVERGE_ERR_ROLLOUT_PLAN', /over 100%/);
  await rejects(startRollout(deps, input({ maxFailures: 'some' })), 'CONVERGE_ERR_ROLLOUT_PLAN', /max failures "some"/);
  await rejects(startRollout(deps, input({ waveTimeoutMs: 0 })), 'CONVERGE_ERR_ROLLOUT_PLAN', /wave timeout/);
  await rejects(startRollout(deps, input({ pauseMs: -1 })), 'CONVERGE_ERR_ROLLOUT_PLAN', /pause between waves/);
  await rejects(startRollout(deps, input({ rollout: 'Bad/Id' })), 'CONVERGE_ERR_ROLLOUT_PLAN', /rollout id "Bad\/Id"/);
  await rejects(
    startRollout(deps, input({ selection: { kind: 'prefix', prefix: 'x-' } })),
    'CONVERGE_ERR_ROLLOUT_PLAN',
    /no node to roll out to: the nodes whose id starts with "x-"/,
  );
  await rejects(startRollout(deps, input({ selection: { kind: 'nodes', nodes: [] } })), 'CONVERGE_ERR_ROLLOUT_PLAN', /node list is empty/);
  await rejects(
    startRollout(deps, input({ selection: { kind: 'spec', specDigest: 'abc' } })),
    'CONVERGE_ERR_ROLLOUT_PLAN',
    /spec digest "abc"/,
  );
  await rejects(startRollout(deps, input({ selection: { kind: 'nodes', nodes: ['Not A Node'] } })), 'CONVERGE_ERR_NODE_ID_INVALID', /./);
  await rejects(startRollout(deps, input({ resources: [{ image: 'x' }] })), 'CONVERGE_ERR_SPEC_INVALID', /resources/);
  await rejects(startRollout(deps, input({ resources: [{ id: 'a' }, { id: 'a' }] })), 'CONVERGE_ERR_SPEC_DUPLICATE_ID', /"a"/);
  assert.equal(await store.headPosition(), null);
});

test('a rollout id is taken once: another plan under it is a plan error; the same start again answers as the first', async () => {
  const { store, deps, tick } = setup();
  const first = await startRollout(deps, input());
  tick(5_000);
  assert.deepEqual(await startRollout(deps, input()), first, 'a retried start is answered, not refused');
  assert.equal((await store.readStream(rolloutStreamOf('r1'))).length, 2);
  await rejects(startRollout(deps, input({ waves: '100%' })), 'CONVERGE_ERR_ROLLOUT_PLAN', /rollout named "r1" exists already/);
  await rejects(startRollout(deps, input({ startedBy: 'mallory' })), 'CONVERGE_ERR_ROLLOUT_PLAN', /exists already/);
  assert.deepEqual((await readRollout(store, 'r1'))?.started.waves, [1, 2, 10, 20]);
  assert.equal((await readRollout(store, 'r1'))?.started.startedAt, '2026-11-30T14:00:00.000Z');
});

test('pause, resume and abort each record one event at the revision read, and refuse what the state does not allow', async () => {
  const { store, deps, tick } = setup();
  await startRollout(deps, input());
  await rejects(resumeRollout(deps, 'r1', { by: 'bob' }), 'CONVERGE_ERR_ROLLOUT_STATE', /running, not paused/);

  tick(1_000);
  const paused = await pauseRollout(deps, 'r1', { by: 'bob', reason: 'lunch' });
  assert.equal(paused.status, 'paused');
  assert.equal(paused.pausedAt, '2026-11-30T14:00:01.000Z');
  await rejects(pauseRollout(deps, 'r1', { by: 'bob', reason: 'again' }), 'CONVERGE_ERR_ROLLOUT_STATE', /paused already/);

  tick(1_000);
  assert.equal((await resumeRollout(deps, 'r1', { by: 'carol' })).status, 'running');
  // Paused twice: the two pauses are different events (their ids name the revision they were taken at).
  await pauseRollout(deps, 'r1', { by: 'bob', reason: 'again' });
  const aborted = await abortRollout(deps, 'r1', { by: 'dave', reason: 'wrong image' });
  assert.equal(aborted.status, 'aborted');
  assert.deepEqual(aborted.aborted, { rollout: 'r1', by: 'dave', reason: 'wrong image', at: '2026-11-30T14:00:02.000Z' });

  await rejects(
    pauseRollout(deps, 'r1', { by: 'bob', reason: '' }),
    'CONVERGE_ERR_ROLLOUT_STATE',
    /has aborted; there is nothing to pause/,
  );
  await rejects(resumeRollout(deps, 'r1', { by: 'bob' }), 'CONVERGE_ERR_ROLLOUT_STATE', /cannot be resumed/);
  await rejects(abortRollout(deps, 'r1', { by: 'bob', reason: '' }), 'CONVERGE_ERR_ROLLOUT_STATE', /aborted already/);
  const types = (await store.readStream(rolloutStreamOf('r1'))).map((e) => e.type).slice(2);
  assert.deepEqual(types, ['RolloutPaused', 'RolloutResumed', 'RolloutPaused', 'RolloutAborted']);
});

test('an unknown rollout, or an id no rollout can have, is CONVERGE_ERR_ROLLOUT_NOT_FOUND', async () => {
  const { deps } = setup();
  await rejects(pauseRollout(deps, 'nope', { by: 'a', reason: '' }), 'CONVERGE_ERR_ROLLOUT_NOT_FOUND', /no rollout named "nope"/);
  await rejects(resumeRollout(deps, '../etc', { by: 'a' }), 'CONVERGE_ERR_ROLLOUT_NOT_FOUND', /no rollout named/);
  await rejects(abortRollout(deps, 'nope', { by: 'a', reason: '' }), 'CONVERGE_ERR_ROLLOUT_NOT_FOUND', /no rollout named/);
});

test('a command that loses the race to the driver reads again and decides on what the driver wrote', async () => {
  const { store, deps } = setup();
  await startRollout(deps, input({ waves: '100%' }));
  // The driver completes the rollout between the command's read and its append.
  const real = store.append.bind(store);
  let raced = false;
  store.append = async (writes) => {
    if (!raced && writes[0]?.events[0]?.type === 'RolloutPaused') {
      raced = true;
      const end = makeRolloutEvent('RolloutCompleted', {
        rollout: 'r1',
        at: '2026-11-30T14:00:00.000Z',
        done: 20,
        failed: 0,
        superseded: 0,
      });
      await real([{ stream: rolloutStreamOf('r1'), expected: 'any', events: [end] }]);
    }
    return real(writes);
  };
  await rejects(
    pauseRollout(deps, 'r1', { by: 'bob', reason: 'late' }),
    'CONVERGE_ERR_ROLLOUT_STATE',
    /has completed; there is nothing to pause/,
  );
  assert.ok(raced);
  assert.deepEqual((await store.readStream(rolloutStreamOf('r1'))).map((e) => e.type).slice(-1), ['RolloutCompleted']);
});

test('12 pauses at once record one RolloutPaused; the others are refused as paused already, and each answer is the state after', async () => {
  const { store, deps } = setup();
  await startRollout(deps, input());
  const results = await Promise.allSettled(Array.from({ length: 12 }, (_, i) => pauseRollout(deps, 'r1', { by: `op${i}`, reason: '' })));
  const paused = (await store.readStream(rolloutStreamOf('r1'))).filter((e) => e.type === 'RolloutPaused');
  assert.equal(paused.length, 1);
  const ok = results.filter((r) => r.status === 'fulfilled');
  assert.equal(ok.length, 1, 'only the pause that recorded something answers with success');
  assert.equal((ok[0] as PromiseFulfilledResult<{ status: string }>).value.status, 'paused');
  for (const r of results.filter((x) => x.status === 'rejected')) {
    assert.ok(
      isConvergeError((r as PromiseRejectedResult).reason, 'CONVERGE_ERR_ROLLOUT_STATE'),
      String((r as PromiseRejectedResult).reason),
    );
  }
  const resumes = await Promise.allSettled(Array.from({ length: 12 }, () => resumeRollout(deps, 'r1', { by: 'op' })));
  assert.equal(resumes.filter((r) => r.status === 'fulfilled').length, 1);
  for (const r of resumes) if (r.status === 'fulfilled') assert.equal(r.value.status, 'running');
  assert.equal((await store.readStream(rolloutStreamOf('r1'))).filter((e) => e.type === 'RolloutResumed').length, 1);
});

test('the operator limits: targets per rollout and open rollouts at once are refused past them, naming the flag', async () => {
  const { deps } = setup(fleet(20));
  let open = 0;
  const limited = { ...deps, limits: { maxTargets: 10, maxOpen: 2 }, openRollouts: () => open };
  await rejects(startRollout(limited, input({ rollout: 'big' })), 'CONVERGE_ERR_ROLLOUT_PLAN', /20 targets.*--max-rollout-targets \(10\)/);
  await assert.rejects(startRollout(limited, input({ rollout: 'big' })), (err: unknown) => {
    assert.deepEqual((err as { details?: unknown }).details, { limit: 'max-rollout-targets', max: 10, got: 20 });
    return true;
  });
  const ten = input({ rollout: 'ten', selection: { kind: 'prefix', prefix: 'n-000' } });
  assert.equal((await startRollout(limited, ten)).targets, 10);
  open = 2;
  await rejects(
    startRollout(limited, input({ rollout: 'third', selection: { kind: 'prefix', prefix: 'n-000' } })),
    'CONVERGE_ERR_ROLLOUT_PLAN',
    /2 rollouts are open .*--max-open-rollouts \(2\)/,
  );
});
