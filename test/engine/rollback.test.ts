import assert from 'node:assert/strict';
import { test } from 'node:test';
import { readDeclaration } from '../../src/core/declaration/index.ts';
import { isConvergeError } from '../../src/core/errors.ts';
import { makeDeclarationSent, streamOf } from '../../src/core/events/index.ts';
import type { RollbackSentData } from '../../src/core/events/index.ts';
import { rollbackRollout } from '../../src/engine/rolloutCommands.ts';
import { explainLine, explainRollout } from '../../src/readModel/rolloutExplain.ts';
import { testKey } from '../support/history.ts';
import { rolloutFleet } from '../support/rolloutFleet.ts';
import type { RolloutFleet } from '../support/rolloutFleet.ts';
import { until } from '../support/until.ts';

// Rollback (docs/design.md §8, "Rollback") over a store, a live read model and a scripted fleet:
// after a halt, every node this rollout sent its spec to is sent the declaration it had before,
// and is rolled back only when it reports that new declaration's digest. A node whose first
// declaration came from the rollout is listed, not sent; a node never sent gets nothing.

const previous = [{ id: 'web', image: 'nginx:1.26' }];

/** Each node was sent `previous` before the rollout, and applied it. */
async function onPrevious(f: RolloutFleet, nodes: readonly string[]): Promise<void> {
  for (const node of nodes) {
    const e = makeDeclarationSent({ node, serial: 1, resources: previous, key: testKey, now: f.now() });
    await f.store.append([{ stream: streamOf(node), expected: 'no_stream', events: [e] }]);
    await f.report(node, { declared: e.data.digest, applied: ['web'] });
  }
  f.tick(1_000);
}

/** a, fresh | b, c | d, e: c refuses, so the rollout halts in wave 2 and d, e are never sent. */
const targets = ['a', 'fresh', 'b', 'c', 'd', 'e'];
const withPrevious = ['a', 'b', 'c', 'd', 'e'];

async function rollbackSent(f: RolloutFleet, id: string): Promise<RollbackSentData[]> {
  return (await f.events(id)).flatMap((e) => (e.type === 'RollbackSent' ? [e.data] : []));
}

/** The node's rollback send, checked to restore `previous` exactly, and that its latest report names it. */
async function restored(f: RolloutFleet, id: string, node: string): Promise<string> {
  const sends = (await f.sentTo(node)).filter((e) => e.data.rollout?.id === id);
  const rollback = sends.find((e) => e.data.rollout?.rollback === true);
  assert.ok(rollback !== undefined, `${node} was sent a rollback`);
  assert.equal(sends.at(-1), rollback, `${node}: the rollback is its latest send from this rollout`);
  assert.deepEqual(readDeclaration(Buffer.from(rollback.data.declaration, 'base64')).resources, previous);
  assert.equal(rollback.data.serial, 3, `${node}: previous 1, ours 2, the rollback a new serial`);
  assert.equal(f.runner.readModel.get(node)?.reported?.declared, rollback.data.digest, `${node} reports the restored digest`);
  return rollback.data.digest;
}

test('rollbackOnHalt all: every node sent gets its previous spec back and reports its digest; a new node is listed; unsent nodes get nothing', async () => {
  const f = await rolloutFleet({ behaviour: { c: 'refuse' } });
  try {
    await onPrevious(f, withPrevious);
    const id = await f.start({ rollout: 'back', selection: { kind: 'nodes', nodes: targets }, waves: '2,4,100%', rollbackOnHalt: 'all' });
    await until('the rollback to end', async () => (await f.rollout(id)).status === 'rolledBack');
    const s = await f.rollout(id);
    assert.equal(s.halted?.wave, 2);
    assert.deepEqual([s.rollback?.started.scope, s.rollback?.started.wave, s.rollback?.started.by], ['all', 2, 'engine']);
    const digests = new Map<string, string>();
    for (const node of ['a', 'b']) digests.set(node, await restored(f, id, node));
    // explain tells the rollback like a wave: begun, sent, each node by the report naming its restored digest, ended.
    const story = (await explainRollout(f.store, id)).entries;
    assert.deepEqual(
      story.filter((e) => e.kind.startsWith('rollback')).map((e) => e.kind),
      ['rollbackStarted', 'rollbackSent', 'rollbackCompleted'],
    );
    const back = story.flatMap((e) => (e.kind === 'nodeRolledBack' ? [[e.node, e.digest]] : []));
    assert.deepEqual(back.sort(), [...digests].sort());
    assert.equal(story.filter((e) => e.kind === 'nodeSuperseded').length, 0, 'a rollback is not a supersession');
    assert.match(story.map(explainLine).join('\n'), /rollback: a rolled back: its report names/);
    // The live view: the rollback counted on its own, the waves as they stood (no node read as superseded).
    const view = f.runner.rollouts.summary(id, f.now().getTime())!;
    assert.deepEqual(
      view.rollback && [view.rollback.targets, view.rollback.done, view.rollback.failed, view.rollback.skippedCount, view.rollback.pending],
      [4, 2, 1, 1, 0],
    );
    assert.equal(view.totals.superseded, 0);
    assert.equal(view.rollbackOnHalt, 'all');
    // c refused our spec, and refuses the restored one too: it reported the digest, and failed.
    const c = (await f.sentTo('c')).at(-1)!;
    assert.equal(c.data.rollout?.rollback, true);
    assert.equal(f.runner.readModel.get('c')?.reported?.declared, c.data.digest);
    const sent = await rollbackSent(f, id);
    assert.deepEqual(sent.flatMap((x) => x.sends.map((y) => y.node)).sort(), ['a', 'b', 'c']);
    assert.deepEqual(
      sent.flatMap((x) => x.skipped.map((y) => [y.node, y.code])),
      [['fresh', 'noPrevious']],
    );
    for (const x of sent.flatMap((y) => y.sends)) assert.equal(x.restores.serial, 1);
    assert.deepEqual(
      s.rollback?.completed && [s.rollback.completed.done, s.rollback.completed.failed, s.rollback.completed.skipped],
      [2, 1, 1],
    );
    assert.deepEqual(
      s.rollback?.completed?.failures.map((x) => [x.node, x.reason]),
      [['c', 'refused']],
    );
    for (const node of ['d', 'e']) assert.equal((await f.sentTo(node)).length, 1, `${node} was never sent anything but its previous spec`);
    assert.equal((await f.sentTo('fresh')).filter((e) => e.data.rollout?.rollback === true).length, 0);
  } finally {
    await f.stop();
  }
});

test('rollbackOnHalt wave: only the halted wave’s nodes are rolled back', async () => {
  const f = await rolloutFleet({ behaviour: { c: 'refuse' } });
  try {
    await onPrevious(f, withPrevious);
    const id = await f.start({ rollout: 'wave', selection: { kind: 'nodes', nodes: targets }, waves: '2,4,100%', rollbackOnHalt: 'wave' });
    await until('the rollback to end', async () => (await f.rollout(id)).status === 'rolledBack');
    await restored(f, id, 'b');
    const sent = await rollbackSent(f, id);
    assert.deepEqual(sent.flatMap((x) => x.sends.map((y) => y.node)).sort(), ['b', 'c']);
    assert.equal((await f.sentTo('a')).filter((e) => e.data.rollout?.rollback === true).length, 0, 'wave 1 stays on the spec');
  } finally {
    await f.stop();
  }
});

test('rollback on demand after a halt, and a second one is refused while the first runs and after it', async () => {
  const f = await rolloutFleet({ behaviour: { c: 'refuse' } });
  try {
    await onPrevious(f, withPrevious);
    const id = await f.start({ rollout: 'demand', selection: { kind: 'nodes', nodes: targets }, waves: '2,4,100%' });
    await until('the rollout to halt', async () => (await f.rollout(id)).status === 'halted');
    await f.settle();
    assert.equal((await f.rollout(id)).rollback, null, 'rollbackOnHalt none: the halt rolls nothing back');
    // Hold the driver so the rollback is seen rolling back, then let it run.
    await f.driver.stop();
    f.behave('c', 'apply');
    const deps = { store: f.store, now: f.now };
    const after = await rollbackRollout(deps, id, { by: 'test', reason: 'bad spec' });
    assert.equal(after.status, 'rollingBack');
    await assert.rejects(rollbackRollout(deps, id, { by: 'test', reason: 'again' }), (e: unknown) =>
      isConvergeError(e, 'CONVERGE_ERR_ROLLOUT_STATE'),
    );
    f.driver.start();
    await until('the rollback to end', async () => (await f.rollout(id)).status === 'rolledBack');
    for (const node of ['a', 'b', 'c']) await restored(f, id, node);
    const s = await f.rollout(id);
    assert.deepEqual([s.rollback?.completed?.done, s.rollback?.completed?.failed, s.rollback?.started.by], [3, 0, 'test']);
    await assert.rejects(rollbackRollout(deps, id, { by: 'test', reason: 'again' }), (e: unknown) =>
      isConvergeError(e, 'CONVERGE_ERR_ROLLOUT_STATE'),
    );
  } finally {
    await f.stop();
  }
});

test('a node that never reports its restored spec fails the rollback at the timeout, as silent', async () => {
  // b says nothing after its previous spec: pending in wave 2 when c's refusal halts it.
  const f = await rolloutFleet({ behaviour: { b: 'silent', c: 'refuse' } });
  try {
    await onPrevious(f, withPrevious);
    const id = await f.start({
      rollout: 'quiet',
      selection: { kind: 'nodes', nodes: targets },
      waves: '2,4,100%',
      rollbackOnHalt: 'wave',
      waveTimeoutMs: 30_000,
    });
    await until('the rollback sent', async () => (await rollbackSent(f, id)).length > 0);
    await f.settle();
    assert.equal((await f.rollout(id)).status, 'rollingBack', 'b has not reported its restored spec');
    f.tick(31_000 + 60_000);
    await until('the rollback to end', async () => (await f.rollout(id)).status === 'rolledBack');
    const done = (await f.rollout(id)).rollback?.completed;
    assert.deepEqual(done?.failures.map((x) => [x.node, x.reason]).sort(), [
      ['b', 'silent'],
      ['c', 'refused'],
    ]);
  } finally {
    await f.stop();
  }
});
