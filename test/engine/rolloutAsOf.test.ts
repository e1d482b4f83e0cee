import assert from 'node:assert/strict';
import { test } from 'node:test';
import { readDeclaration, specDigestOf } from '../../src/core/declaration/index.ts';
import { isConvergeError } from '../../src/core/errors.ts';
import { makeDeclarationSent, streamOf } from '../../src/core/events/index.ts';
import type { RolloutSentData } from '../../src/core/events/index.ts';
import { setHold } from '../../src/engine/holds.ts';
import { explainLine, explainRollout } from '../../src/readModel/rolloutExplain.ts';
import { testKey } from '../support/history.ts';
import { rolloutFleet } from '../support/rolloutFleet.ts';
import type { RolloutFleet } from '../support/rolloutFleet.ts';
import { until } from '../support/until.ts';

// Restore from history as a rollout (docs/design.md §8, "A rollout as of a moment"): each target is
// sent the exact spec it had been sent as of a time or a store position, read from that send's
// bytes; a target sent nothing by then is skipped with code noneAsOf, neither done nor failed.

const v1 = [{ id: 'web', image: 'nginx:1.26' }];
const v1b = [
  { id: 'web', image: 'nginx:1.26' },
  { id: 'cache', image: 'redis:7' },
];
const v2 = [{ id: 'web', image: 'nginx:1.27' }];

async function sendNode(f: RolloutFleet, node: string, serial: number, resources: readonly { id: string; image: string }[], at = f.now()) {
  const e = makeDeclarationSent({ node, serial, resources, key: testKey, now: at });
  await f.store.append([{ stream: streamOf(node), expected: 'any', events: [e] }]);
  await f.report(node, { declared: e.data.digest, applied: resources.map((r) => r.id) });
  return e;
}

/** a had v1, b had v1b at the moment; then a, b and c (its first) were sent v2. */
async function history(f: RolloutFleet): Promise<{ at: Date; position: bigint; was: Map<string, string> }> {
  const was = new Map<string, string>();
  was.set('a', (await sendNode(f, 'a', 1, v1)).data.digest);
  was.set('b', (await sendNode(f, 'b', 1, v1b)).data.digest);
  const position = (await f.store.headPosition())!;
  f.tick(60_000);
  const at = f.now();
  f.tick(60_000);
  for (const node of ['a', 'b']) await sendNode(f, node, 2, v2);
  await sendNode(f, 'c', 1, v2);
  await f.settle();
  return { at, position, was };
}

const sentData = async (f: RolloutFleet, id: string): Promise<RolloutSentData[]> =>
  (await f.events(id)).flatMap((e) => (e.type === 'RolloutSent' ? [e.data] : []));

async function checkRestored(f: RolloutFleet, id: string, was: Map<string, string>): Promise<void> {
  await until('the rollout to complete', async () => (await f.rollout(id)).status === 'completed');
  const expect = new Map([
    ['a', v1],
    ['b', v1b],
  ]);
  for (const [node, resources] of expect) {
    const ours = (await f.sentTo(node)).filter((e) => e.data.rollout?.id === id);
    assert.equal(ours.length, 1, `${node}: one send from the rollout`);
    assert.deepEqual(readDeclaration(Buffer.from(ours[0]!.data.declaration, 'base64')).resources, resources, `${node}'s spec then`);
    assert.equal(ours[0]!.data.specDigest, specDigestOf(resources));
    assert.equal(ours[0]!.data.serial, 3, `${node}: a new serial`);
  }
  const sent = await sentData(f, id);
  const sends = sent.flatMap((x) => x.sends);
  assert.deepEqual(sends.map((x) => [x.node, x.restores?.serial, x.restores?.digest]).sort(), [
    ['a', 1, was.get('a')],
    ['b', 1, was.get('b')],
  ]);
  const skipped = sent.flatMap((x) => x.skipped);
  assert.deepEqual(skipped.map((x) => [x.node, x.code]).sort(), [
    ['c', 'noneAsOf'],
    ['fresh', 'noneAsOf'],
  ]);
  assert.match(skipped[0]!.reason, /sent nothing at or before/);
  const s = await f.rollout(id);
  assert.equal(s.completed?.done, 2);
  assert.equal(s.completed?.failed, 0, 'a node with nothing then is skipped, not failed');
  assert.equal((await f.sentTo('c')).length, 1, 'c was sent nothing');
}

test('as of a time: each target gets the exact spec it had then; nodes with nothing then are skipped', async () => {
  const f = await rolloutFleet();
  try {
    const { at, was } = await history(f);
    const id = await f.start({
      rollout: 'back-then',
      resources: [],
      asOf: { at },
      selection: { kind: 'nodes', nodes: ['a', 'c', 'b', 'fresh'] },
      waves: '1,100%',
    });
    await checkRestored(f, id, was);
    const s = await f.rollout(id);
    assert.deepEqual(s.started.asOf, { at: at.toISOString(), upTo: s.started.asOf?.upTo });
    assert.equal(s.waves.length, 2, 'waves as any rollout');
    const story = (await explainRollout(f.store, id)).entries.map(explainLine).join('\n');
    assert.match(story, /c: had been sent nothing/);
    assert.match(story, new RegExp(`started by test: each node's own spec as of ${at.toISOString()} \\(history up to position \\d+\\)`));
  } finally {
    await f.stop();
  }
});

test('as of a store position: the latest send at or before it', async () => {
  const f = await rolloutFleet();
  try {
    const { position, was } = await history(f);
    const id = await f.start({
      rollout: 'at-pos',
      resources: [],
      asOf: { position },
      selection: { kind: 'nodes', nodes: ['a', 'b', 'c', 'fresh'] },
    });
    await checkRestored(f, id, was);
  } finally {
    await f.stop();
  }
});

test('holds and pins are skipped as in any rollout; a send stored after the start is never taken', async () => {
  const f = await rolloutFleet({ drive: false });
  try {
    const { at } = await history(f);
    await setHold(f.store, 'b', 'hold', { now: f.now(), by: 'ops' });
    const id = await f.start({ rollout: 'held', resources: [], asOf: { at }, selection: { kind: 'nodes', nodes: ['a', 'b', 'fresh'] } });
    // Another engine, its clock behind, stores fresh's first send stamped before the moment: after
    // the rollout started, so not part of the history it restores.
    await sendNode(f, 'fresh', 1, v1, new Date(at.getTime() - 30_000));
    f.driver.start();
    await until('the rollout to complete', async () => (await f.rollout(id)).status === 'completed');
    const skipped = (await sentData(f, id)).flatMap((x) => x.skipped);
    assert.deepEqual(skipped.map((x) => [x.node, x.code]).sort(), [
      ['b', 'held'],
      ['fresh', 'noneAsOf'],
    ]);
  } finally {
    await f.stop();
  }
});

test('a plan as of a time to come, a position past the head, or with a spec too is refused', async () => {
  const f = await rolloutFleet();
  try {
    await history(f);
    const plan = (extra: Record<string, unknown>) => f.start({ selection: { kind: 'nodes', nodes: ['a'] }, resources: [], ...extra });
    const refused = async (extra: Record<string, unknown>, pattern: RegExp) =>
      assert.rejects(plan(extra), (e: unknown) => isConvergeError(e, 'CONVERGE_ERR_ROLLOUT_PLAN') && pattern.test((e as Error).message));
    await refused({ asOf: { at: new Date(f.now().getTime() + 1_000) } }, /to come/);
    await refused({ asOf: { position: 10_000n } }, /past the store's head/);
    await refused({ asOf: { at: f.now() }, resources: v1 }, /not both/);
    await refused({ asOf: { at: new Date(Number.NaN) } }, /not a valid time/);
  } finally {
    await f.stop();
  }
});

test('budgets and rollback as in any rollout: a refusal halts it, and each node gets back the spec it had before', async () => {
  const f = await rolloutFleet();
  try {
    const { at } = await history(f);
    f.behave('b', 'refuse');
    const id = await f.start({
      rollout: 'halts',
      resources: [],
      asOf: { at },
      selection: { kind: 'nodes', nodes: ['a', 'b'] },
      waves: '100%',
      maxFailures: '0',
      rollbackOnHalt: 'all',
    });
    await until('the rollback to end', async () => (await f.rollout(id)).status === 'rolledBack');
    const s = await f.rollout(id);
    assert.equal(s.halted?.wave, 1);
    assert.deepEqual(
      s.halted?.failed.map((x) => [x.node, x.reason]),
      [['b', 'refused']],
    );
    // The rollback restores what each node had before this rollout's send: v2, sent after the moment.
    const back = (await f.sentTo('a')).at(-1)!;
    assert.equal(back.data.rollout?.rollback, true);
    assert.deepEqual(readDeclaration(Buffer.from(back.data.declaration, 'base64')).resources, v2);
  } finally {
    await f.stop();
  }
});
