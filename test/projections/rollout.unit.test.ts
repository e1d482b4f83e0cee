import assert from 'node:assert/strict';
import { test } from 'node:test';
import { foldRollout, foldRolloutEvents } from '../../projections/index.ts';
import { budgetUsed, decide, nodeOutcome, planBudget, planWaves, selectTargets } from '../../src/core/rollout/index.ts';
import type { NodeState } from '../../projections/index.ts';
import type { Decision } from '../../src/core/rollout/index.ts';
import { specDigestOf } from '../../src/core/declaration/index.ts';
import { makeRolloutEvent } from '../../src/core/events/index.ts';
import type { Recorded, RolloutEvent, WithId } from '../../src/core/events/index.ts';
import { world } from '../support/rolloutWorld.ts';

// The pure side of rollouts: the plan, the rollout's fold, the rule that says when a node is done
// in its wave, and the driver's decision, exercised without a store or a clock.

const cumulative = (text: string, targets: number): readonly number[] => {
  const p = planWaves(text, targets);
  assert.ok(typeof p !== 'string', p as string);
  return p.cumulative;
};

test('waves are cumulative counts or percentages of the targets, rounded up; empty steps drop and the last reaches every node', () => {
  assert.deepEqual(planWaves('1,10%,50%,100%', 100), { asGiven: '1,10%,50%,100%', cumulative: [1, 10, 50, 100] });
  assert.deepEqual(cumulative('1,10%,50%,100%', 5), [1, 3, 5]);
  assert.deepEqual(cumulative('2,4', 10), [2, 4, 10]);
  assert.deepEqual(cumulative('100%', 7), [7]);
  assert.deepEqual(cumulative('50', 3), [3]);
  assert.match(planWaves('1,,2', 10) as string, /separated by commas/);
  assert.match(planWaves('ten', 10) as string, /not a count or a percentage/);
  assert.match(planWaves('150%', 10) as string, /over 100%/);
});

test('the failure budget is a count or a percentage of the targets, rounded down', () => {
  assert.equal(planBudget('0', 10), 0);
  assert.equal(planBudget('3', 10), 3);
  assert.equal(planBudget('25%', 10), 2);
  assert.match(planBudget('-1', 10) as string, /not a count/);
  assert.match(planBudget('101%', 10) as string, /over 100%/);
});

test('targets: an explicit list keeps its order without repeats; the others come from the node states, sorted by id', () => {
  const states = [
    { node: 'b-2', sent: { specDigest: 'x' } },
    { node: 'a-1', sent: { specDigest: 'y' } },
    { node: 'b-1', sent: null },
  ] as unknown as NodeState[];
  assert.deepEqual(selectTargets({ kind: 'nodes', nodes: ['z', 'a', 'z'] }, states), ['z', 'a']);
  assert.deepEqual(selectTargets({ kind: 'all' }, states), ['a-1', 'b-1', 'b-2']);
  assert.deepEqual(selectTargets({ kind: 'spec', specDigest: 'x'.repeat(1) }, states), ['b-2']);
  assert.deepEqual(selectTargets({ kind: 'prefix', prefix: 'b-' }, states), ['b-1', 'b-2']);
});

const kinds = (ds: readonly Decision[]): string[] => ds.map((d) => (d.kind === 'wait' ? `wait(${d.why})` : d.kind));

// The rule the mesh used before digests, as a wave would apply it: a node whose latest report
// arrived after this rollout's send is done. Kept only here, as the counterexample.
function clockRuleSaysDone(n: NodeState, sentAt: string): boolean {
  return n.reported !== null && Date.parse(n.reported.receivedAt) >= Date.parse(sentAt) && n.reported.refused === '';
}

test("the seed's race inside a rollout: a slow node's late report about its previous declaration never completes it in the wave", () => {
  const w = world('r1', ['slow', 'fast'], { waves: '100%' });
  // Before the rollout, `slow` was sent something it is still applying.
  const previous = w.h('slow').send([{ id: 'web', image: 'nginx:1.26' }]);
  w.tick(1_000);
  assert.deepEqual(kinds(w.run()), ['startWave', 'send', 'wait(2 node(s) of wave 1 still behind)']);
  w.tick(100);
  w.h('fast').report({ applied: ['web'], declared: w.digestSentTo('fast') });
  w.tick(300);
  // The report about the previous declaration lands after the rollout's send.
  w.h('slow').report({ applied: ['web'], declared: previous.data.digest });

  const slow = w.node('slow');
  assert.equal(slow.reported?.class, 'stale');
  assert.equal(nodeOutcome(w.state().sends.get('slow'), undefined, slow), 'pending');
  assert.equal(w.progress()?.pending, 1);
  assert.equal(w.decide().kind, 'wait', 'the wave must not complete on a stale report');
  const sentAt = w.state().sends.get('slow')!.sentAt;
  assert.equal(clockRuleSaysDone(slow, sentAt), true, 'a clock rule would have counted the stale report and opened the next wave');

  w.tick(200);
  w.h('slow').report({ applied: ['web'], declared: w.digestSentTo('slow') });
  assert.deepEqual(kinds(w.run()), ['completeWave', 'complete', 'wait(completed)']);
  const s = w.state();
  assert.equal(s.status, 'completed');
  assert.deepEqual(s.waves[0]?.completed && { done: s.waves[0].completed.done, failed: s.waves[0].completed.failed }, {
    done: 2,
    failed: 0,
  });
});

test('a wave opens only once the one before is done, after the pause between waves', () => {
  const w = world('r2', ['a', 'b', 'c', 'd'], { waves: '1,50%,100%', pauseMs: 5_000 });
  assert.deepEqual(kinds(w.run()), ['startWave', 'send', 'wait(1 node(s) of wave 1 still behind)']);
  assert.deepEqual(
    w.state().waves.map((x) => [x.from, x.to]),
    [
      [0, 1],
      [1, 2],
      [2, 4],
    ],
  );
  w.h('a').report({ applied: ['web'], declared: w.digestSentTo('a') });
  assert.deepEqual(kinds(w.run()), ['completeWave', 'wait(pause before wave 2)']);
  w.tick(4_999);
  assert.equal(w.decide().kind, 'wait');
  w.tick(1);
  assert.deepEqual(kinds(w.run()), ['startWave', 'send', 'wait(1 node(s) of wave 2 still behind)']);
  assert.deepEqual([...w.state().sends.keys()], ['a', 'b']);
});

test('a refusing node and a degraded node halt the rollout at the wave where failures exceed the budget', () => {
  const w = world('r3', ['n1', 'n2', 'n3', 'n4', 'n5', 'n6'], { waves: '2,4,6', maxFailures: 1 });
  w.run();
  w.h('n1').report({ applied: ['web'], declared: w.digestSentTo('n1') });
  w.h('n2').report({ refused: 'no room', declared: w.digestSentTo('n2') });
  // One failure is within the budget of 1: the wave completes with it.
  assert.deepEqual(kinds(w.run()).slice(0, 3), ['completeWave', 'startWave', 'send']);
  assert.equal(w.state().failed, 1);
  w.h('n3').report({ applied: ['web'], declared: w.digestSentTo('n3') });
  w.h('n4').report({ applied: [], failed: { web: 'image pull failed' }, declared: w.digestSentTo('n4') });
  const d = w.decide();
  assert.equal(d.kind, 'halt');
  w.apply(d);
  const s = w.state();
  assert.equal(s.status, 'halted');
  assert.equal(s.halted?.wave, 2);
  assert.equal(s.halted?.failures, 2);
  assert.deepEqual(s.halted?.failed, [{ node: 'n4', reason: 'degraded', detail: 'failed web (image pull failed)' }]);
  assert.deepEqual(s.waves[0]?.completed?.failures, [{ node: 'n2', reason: 'refused', detail: 'refused: no room' }]);
  assert.equal(w.decide().kind, 'wait', 'a halted rollout sends nothing more');
  assert.equal(s.sends.has('n5'), false);
});

test('nodes still behind when the wave times out count against the budget, connected ones as timeout and silent ones as silent; a paused rollout does not time out', () => {
  const w = world('r4', ['a', 'b', 'c'], { waves: '100%', maxFailures: 1, timeoutMs: 10_000 });
  w.run();
  w.h('a').report({ applied: ['web'], declared: w.digestSentTo('a') });
  w.tick(5_000);
  w.pause();
  w.tick(60_000);
  assert.equal(w.decide().kind, 'wait');
  w.resume();
  w.tick(4_999);
  const waiting = w.decide();
  assert.equal(waiting.kind, 'wait');
  assert.equal((waiting as { untilMs: number }).untilMs, w.now() + 1, 'the minute paused is added to the timeout');
  w.tick(1);
  // b is connected (an alive just now) but behind: a timeout; c was never heard from: silent.
  w.h('b').alive();
  const d = w.decide();
  assert.equal(d.kind, 'halt');
  assert.deepEqual(
    (d as Extract<Decision, { kind: 'halt' }>).data.failed.map((f) => [f.node, f.reason, f.detail]),
    [
      ['b', 'timeout', 'no report since the send'],
      ['c', 'silent', 'silent: never seen'],
    ],
  );
});

test('a node sent a newer declaration from elsewhere is superseded, not done, and spends the budget', () => {
  const w = world('r5', ['a', 'b'], { waves: '100%', maxFailures: 1 });
  w.run();
  w.h('a').report({ applied: ['web'], declared: w.digestSentTo('a') });
  const newer = w.h('b').send([{ id: 'db' }]);
  w.h('b').report({ applied: ['db'], declared: newer.data.digest });
  assert.equal(nodeOutcome(w.state().sends.get('b'), undefined, w.node('b')), 'superseded');
  assert.deepEqual(kinds(w.run()), ['completeWave', 'complete', 'wait(completed)']);
  const s = w.state();
  assert.deepEqual([s.done, s.failed, s.superseded], [1, 0, 1]);
  assert.deepEqual(s.waves[0]?.completed?.supersededNodes, ['b']);
  assert.equal(budgetUsed(s), 1);
});

test('targets listed over several events are joined in order; a list repeated at the same offset adds nothing', () => {
  const resources = [{ id: 'web' }];
  const started = makeRolloutEvent('RolloutStarted', {
    rollout: 'r6',
    resources,
    specDigest: specDigestOf(resources),
    selection: { kind: 'all' },
    targets: 3,
    waves: [1, 3],
    asGiven: { waves: '1,100%', maxFailures: '0' },
    maxFailures: 0,
    waveTimeoutMs: 1_000,
    pauseMs: 0,
    startedBy: 'test',
    startedAt: '2026-11-30T14:00:00.000Z',
  });
  const list = (from: number, nodes: string[]) =>
    makeRolloutEvent('RolloutNodesListed', { rollout: 'r6', from, nodes, listedAt: '2026-11-30T14:00:00.000Z' });
  const stream = [started, list(0, ['a', 'b']), list(0, ['a', 'b']), list(2, ['c'])].map(
    (e, i) => ({ ...e, stream: 'rollout-r6', revision: BigInt(i), position: BigInt(i + 1) }) as Recorded<RolloutEvent>,
  );
  const partial = foldRolloutEvents(stream.slice(0, 3))!;
  assert.deepEqual(partial.targets, ['a', 'b']);
  assert.equal(decide(partial, null, 0).kind, 'wait', 'no wave opens before every target is listed');
  const s = foldRolloutEvents(stream)!;
  assert.deepEqual(s.targets, ['a', 'b', 'c']);
  assert.equal(s.revision, 3n);
  assert.deepEqual(decide(s, null, 0), { kind: 'startWave', wave: 1, from: 0, to: 1 });
});

test('a lone canary superseded from elsewhere proves nothing: by default it counts against the budget and wave 2 never opens', () => {
  const w = world('r-canary', ['canary', ...Array.from({ length: 9 }, (_, i) => `n${i}`)], { waves: '1,100%' });
  assert.deepEqual(kinds(w.run()), ['startWave', 'send', 'wait(1 node(s) of wave 1 still behind)']);
  // Another declaration reaches the canary before it read ours (a stray POST /v1/declarations).
  const newer = w.h('canary').send([{ id: 'db' }]);
  w.h('canary').report({ applied: ['db'], declared: newer.data.digest });
  const d = w.decide();
  assert.equal(d.kind, 'halt', `decided ${kinds([d]).join()}`);
  assert.deepEqual(
    (d as Extract<Decision, { kind: 'halt' }>).data.failed.map((f) => [f.node, f.reason]),
    [['canary', 'superseded']],
  );
  w.apply(d);
  assert.equal(w.state().status, 'halted');
  assert.equal(w.state().current, 1, 'wave 2 never opened');
  assert.equal(w.state().sends.size, 1);
});

test('a wave with no node done never completes, even when its failures are within the budget', () => {
  const w = world('r-nodone', ['canary', 'n1', 'n2'], { waves: '1,100%', maxFailures: 2 });
  w.run();
  const newer = w.h('canary').send([{ id: 'db' }]);
  w.h('canary').report({ applied: ['db'], declared: newer.data.digest });
  const d = w.decide();
  assert.equal(d.kind, 'halt', `decided ${kinds([d]).join()}`);
  assert.equal((d as Extract<Decision, { kind: 'halt' }>).data.why, 'noneDone');
  w.apply(d);
  assert.equal(w.state().current, 1);

  // The same with a degraded canary and a budget of 1: no proof, so wave 2 does not open to everyone.
  const v = world('r-degraded', ['canary', 'n1', 'n2'], { waves: '1,100%', maxFailures: 1 });
  v.run();
  v.h('canary').report({ applied: [], failed: { web: 'image pull failed' }, declared: v.digestSentTo('canary') });
  const e = v.decide();
  assert.equal(e.kind, 'halt', `decided ${kinds([e]).join()}`);
  assert.equal((e as Extract<Decision, { kind: 'halt' }>).data.why, 'noneDone');
});

test("onSuperseded 'hold' keeps the wave open on a superseded node; a rollout recorded without the field takes 'fail'", () => {
  const w = world('r-hold', ['a', 'b', 'c'], { waves: '2,100%', maxFailures: 5, onSuperseded: 'hold' });
  w.run();
  w.h('a').report({ applied: ['web'], declared: w.digestSentTo('a') });
  const newer = w.h('b').send([{ id: 'db' }]);
  w.h('b').report({ applied: ['db'], declared: newer.data.digest });
  assert.deepEqual(kinds(w.run()), ['wait(1 superseded node(s) hold wave 1: abort the rollout, or send them its spec again)']);
  w.tick(3_600_000);
  assert.equal(w.decide().kind, 'wait', 'the timeout does not turn a held wave into a completed one');
  assert.equal(w.state().current, 1);

  const old = world('r-old', ['a', 'b', 'c'], { waves: '2,100%', maxFailures: 5, onSuperseded: null });
  assert.equal(old.state().started.onSuperseded, undefined);
  old.run();
  old.h('a').report({ applied: ['web'], declared: old.digestSentTo('a') });
  const other = old.h('b').send([{ id: 'db' }]);
  old.h('b').report({ applied: ['db'], declared: other.data.digest });
  // Within the budget of 5 and with a node done: the wave completes, the superseded node spent one of the budget.
  assert.deepEqual(kinds(old.run()).slice(0, 2), ['completeWave', 'startWave']);
  assert.equal(budgetUsed(old.state()), 1);
});

test('a 1,000,000-target rollout folds without copying what it folded before: one array and one map grow in place, and earlier states keep their own view', () => {
  // Copying the targets (and the sends) for every 1,000-node list made this fold quadratic: 30 s
  // for one POST of a million nodes. Growth in place is asserted by identity, not by a clock.
  const id = 'big';
  const lists = 1_000;
  const per = 1_000;
  const resources = [{ id: 'web' }];
  const at = '2026-11-30T14:00:00.000Z';
  let revision = 0n;
  const recorded = (e: WithId<RolloutEvent>): Recorded<RolloutEvent> =>
    ({ ...e, stream: `rollout-${id}`, revision: revision++, position: revision }) as Recorded<RolloutEvent>;
  const nodeAt = (i: number): string => `n-${i}`;
  let s = foldRolloutEvents([
    recorded(
      makeRolloutEvent('RolloutStarted', {
        rollout: id,
        resources,
        specDigest: specDigestOf(resources),
        selection: { kind: 'nodes' },
        targets: lists * per,
        waves: [lists * per],
        asGiven: { waves: '100%', maxFailures: '0' },
        maxFailures: 0,
        waveTimeoutMs: 60_000,
        pauseMs: 0,
        startedBy: 'test',
        startedAt: at,
      }),
    ),
  ])!;
  const chunk = (k: number): string[] => Array.from({ length: per }, (_, j) => nodeAt(k * per + j));
  const first = foldRollout(s, recorded(makeRolloutEvent('RolloutNodesListed', { rollout: id, from: 0, nodes: chunk(0), listedAt: at })));
  const targets = first.targets;
  s = first;
  for (let k = 1; k < lists; k++) {
    s = foldRollout(s, recorded(makeRolloutEvent('RolloutNodesListed', { rollout: id, from: k * per, nodes: chunk(k), listedAt: at })));
    assert.equal(s.targets, targets, `list ${k + 1} copied the ${k * per} targets before it`);
  }
  assert.equal(s.targets.length, lists * per);
  assert.equal(s.targets[999_999], 'n-999999');
  assert.equal(first.targets.length, per, 'an earlier state still sees only its own targets');
  assert.deepEqual(first.targets.slice(-1), ['n-999']);

  s = foldRollout(s, recorded(makeRolloutEvent('WaveStarted', { rollout: id, wave: 1, from: 0, to: lists * per, startedAt: at })));
  const digest = 'a'.repeat(64);
  const sent = (k: number) =>
    recorded(
      makeRolloutEvent('RolloutSent', {
        rollout: id,
        wave: 1,
        sends: chunk(k).map((node) => ({ node, serial: 1, digest })),
        skipped: k === 0 ? [{ node: 'n-0', code: 'X', reason: 'carried port' }] : [],
        sentAt: at,
      }),
    );
  const firstSent = foldRollout(s, sent(0));
  const sends = firstSent.sends;
  s = firstSent;
  for (let k = 1; k < lists; k++) {
    s = foldRollout(s, sent(k));
    assert.equal(s.sends, sends, `send ${k + 1} copied the ${k * per} sends before it`);
  }
  assert.equal(s.sends.size, lists * per);
  assert.equal(s.sends.get('n-999999')?.serial, 1);
  assert.equal(firstSent.sends.size, per, 'an earlier state still sees only its own sends');
  assert.equal(firstSent.sends.get('n-1000'), undefined);
  assert.equal(firstSent.skipped.get('n-0')?.code, 'X');
  assert.ok(s.waves[0]?.lastSentAtMs !== null);
});

test('folding an earlier state again branches: neither line sees the other, and a wave changed later is as it was for an earlier state', () => {
  const resources = [{ id: 'web' }];
  const at = (m: number) => `2026-11-30T14:0${m}:00.000Z`;
  const events: Recorded<RolloutEvent>[] = [
    makeRolloutEvent('RolloutStarted', {
      rollout: 'b',
      resources,
      specDigest: specDigestOf(resources),
      selection: { kind: 'nodes' },
      targets: 3,
      waves: [1, 3],
      asGiven: { waves: '1,100%', maxFailures: '0' },
      maxFailures: 0,
      waveTimeoutMs: 1_000,
      pauseMs: 0,
      startedBy: 'test',
      startedAt: at(0),
    }),
    makeRolloutEvent('RolloutNodesListed', { rollout: 'b', from: 0, nodes: ['a', 'b', 'c'], listedAt: at(0) }),
    makeRolloutEvent('WaveStarted', { rollout: 'b', wave: 1, from: 0, to: 1, startedAt: at(1) }),
  ].map((e, i) => ({ ...e, stream: 'rollout-b', revision: BigInt(i), position: BigInt(i + 1) }) as Recorded<RolloutEvent>);
  const base = foldRolloutEvents(events)!;
  const send = (node: string, serial: number, i: number) =>
    ({
      ...makeRolloutEvent('RolloutSent', {
        rollout: 'b',
        wave: 1,
        sends: [{ node, serial, digest: 'b'.repeat(64) }],
        skipped: [],
        sentAt: at(2),
      }),
      stream: 'rollout-b',
      revision: BigInt(i),
      position: BigInt(i + 1),
    }) as Recorded<RolloutEvent>;
  const one = foldRollout(base, send('a', 1, 3));
  const again = foldRollout(one, send('a', 2, 4));
  const other = foldRollout(base, send('b', 7, 3));
  assert.equal(again.sends.get('a')?.serial, 2);
  assert.equal(one.sends.get('a')?.serial, 1, 'a send overwritten later is as it was for the earlier state');
  assert.deepEqual([...other.sends.keys()], ['b']);
  assert.deepEqual([...again.sends.keys()], ['a']);
  assert.equal(base.sends.size, 0);
  assert.equal(base.waves[0]?.lastSentAtMs, null, 'the wave as it was before any send');
  assert.equal(one.waves[0]?.lastSentAtMs, Date.parse(at(2)));
  assert.deepEqual(other.targets, ['a', 'b', 'c']);
});
