import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { conditionReasons, foldNodeEvents, nodeView, recordedLivenessAt } from '../../../projections/index.ts';
import type { Condition, ConditionReason, ConditionType, NodeView } from '../../../projections/index.ts';
import { history } from '../../support/history.ts';

// One test per reason of the closed list (projections/node/conditions.ts, docs/api.md#conditions):
// each names the events that give it and the event whose time is its lastTransitionTime.

const node = 'edge-07';
const grace = 60_000;
// Read long after every event, so a lastTransitionTime equal to the read time would show.
const readLater = (h: ReturnType<typeof history>): number => h.now().getTime() + 10_000;
const seen = new Set<ConditionReason>();

function view(h: ReturnType<typeof history>, at = readLater(h)): NodeView {
  return nodeView(foldNodeEvents(node, h.events), at, grace);
}

function cond(v: NodeView, type: ConditionType): Condition {
  const c = v.conditions.find((x) => x.type === type);
  assert.ok(c, `no ${type} condition`);
  // Kubernetes' order of the fields, so every condition prints the same way in JSON and YAML.
  assert.deepEqual(Object.keys(c), ['type', 'status', 'reason', 'message', 'lastTransitionTime']);
  seen.add(c.reason);
  return c;
}

const digestOf = (e: { data: { digest: string } }): string => e.data.digest;

test('conditions come in the order Converged, CaughtUp, Connected', () => {
  const h = history(node);
  h.send();
  assert.deepEqual(
    view(h).conditions.map((c) => c.type),
    ['Converged', 'CaughtUp', 'Connected'],
  );
});

test('NotDeclared: nothing sent, no transition time', () => {
  const h = history(node);
  h.alive();
  const v = view(h);
  for (const type of ['Converged', 'CaughtUp'] as const) {
    const c = cond(v, type);
    assert.deepEqual([c.status, c.reason, c.lastTransitionTime], ['False', 'NotDeclared', null]);
  }
});

test("NotReported: sent, no report yet; the send's sentAt", () => {
  const h = history(node);
  const a = h.send();
  const c = cond(view(h), 'Converged');
  assert.deepEqual([c.status, c.reason, c.lastTransitionTime], ['False', 'NotReported', a.data.sentAt]);
  assert.match(c.message, /sent serial 1 at .*no report yet/);
});

test('NotReported: the report named the send before the latest, which it was when folded', () => {
  const h = history(node);
  const a = h.send();
  h.tick();
  h.report({ applied: ['web'], declared: digestOf(a) });
  h.tick();
  const b = h.send([{ id: 'web' }, { id: 'db' }]);
  const c = cond(view(h), 'CaughtUp');
  assert.deepEqual([c.status, c.reason, c.lastTransitionTime], ['False', 'NotReported', b.data.sentAt]);
  assert.match(c.message, /sent serial 2 at .*not reported yet \(last reported serial 1 at /);
});

test('StaleReport: a report of the earlier send lands after the newer one; the later of the two', () => {
  const h = history(node);
  const a = h.send();
  h.tick(200);
  const b = h.send([{ id: 'web' }, { id: 'db' }]);
  h.tick(300);
  const r = h.report({ applied: ['web'], declared: digestOf(a) });
  const c = cond(view(h), 'Converged');
  assert.deepEqual([c.status, c.reason, c.lastTransitionTime], ['False', 'StaleReport', r.data.receivedAt]);
  assert.equal(c.message, `reported serial 1 at ${r.data.receivedAt}, sent serial 2 at ${b.data.sentAt}`);
});

test('UnknownDigest: the report names a digest never sent to the node', () => {
  const h = history(node);
  h.send();
  h.tick();
  const r = h.report({ declared: 'f'.repeat(64) });
  const c = cond(view(h), 'CaughtUp');
  assert.deepEqual([c.status, c.reason, c.lastTransitionTime], ['False', 'UnknownDigest', r.data.receivedAt]);
  assert.match(c.message, /ffffffffffff… .*never sent to this node/);
});

test('LegacyReport: the report names no digest', () => {
  const h = history(node);
  h.send();
  h.tick();
  const r = h.report({ applied: ['web'] });
  const c = cond(view(h), 'Converged');
  assert.deepEqual([c.status, c.reason, c.lastTransitionTime], ['False', 'LegacyReport', r.data.receivedAt]);
});

test('Acknowledged: caught up since the first report naming the latest send', () => {
  const h = history(node);
  const a = h.send();
  h.tick();
  const first = h.report({ applied: ['web'], declared: digestOf(a) });
  h.tick();
  h.report({ applied: ['web'], declared: digestOf(a) });
  const c = cond(view(h), 'CaughtUp');
  assert.deepEqual([c.status, c.reason, c.lastTransitionTime], ['True', 'Acknowledged', first.data.receivedAt]);
});

test('Refused: caught up, refused whole', () => {
  const h = history(node);
  const a = h.send();
  h.tick();
  const r = h.report({ declared: digestOf(a), refused: 'signature does not verify' });
  const c = cond(view(h), 'Converged');
  assert.deepEqual([c.status, c.reason, c.lastTransitionTime], ['False', 'Refused', r.data.receivedAt]);
  assert.equal(c.message, 'serial 1 refused: signature does not verify');
  assert.equal(cond(view(h), 'CaughtUp').status, 'True');
});

test('ResourcesFailed: caught up, a resource failed', () => {
  const h = history(node);
  const a = h.send([{ id: 'web' }, { id: 'db' }]);
  h.tick();
  const r = h.report({ declared: digestOf(a), applied: ['web'], failed: { db: 'port 5432 in use' } });
  const c = cond(view(h), 'Converged');
  assert.deepEqual([c.status, c.reason, c.lastTransitionTime], ['False', 'ResourcesFailed', r.data.receivedAt]);
  assert.equal(c.message, 'serial 1: db: port 5432 in use');
});

test('ResourcesMissing: caught up, a resource neither applied nor failed', () => {
  const h = history(node);
  const a = h.send([{ id: 'web' }, { id: 'db' }]);
  h.tick();
  const r = h.report({ declared: digestOf(a), applied: ['web'] });
  const c = cond(view(h), 'Converged');
  assert.deepEqual([c.status, c.reason, c.lastTransitionTime], ['False', 'ResourcesMissing', r.data.receivedAt]);
  assert.match(c.message, /neither applied nor failed: db$/);
});

test('Converged: caught up, everything applied', () => {
  const h = history(node);
  const a = h.send();
  h.tick();
  const r = h.report({ declared: digestOf(a), applied: ['web'] });
  const c = cond(view(h), 'Converged');
  assert.deepEqual([c.status, c.reason, c.lastTransitionTime], ['True', 'Converged', r.data.receivedAt]);
});

test('Heard: connected, as of the last sign of life', () => {
  const h = history(node);
  const al = h.alive();
  const c = cond(view(h), 'Connected');
  assert.deepEqual([c.status, c.reason, c.lastTransitionTime], ['True', 'Heard', al.data.seenAt]);
});

test('Silent: disconnected since the last sign of life, not since the read', () => {
  const h = history(node);
  const al = h.alive();
  const c = cond(view(h, h.now().getTime() + 10 * grace), 'Connected');
  assert.deepEqual([c.status, c.reason, c.lastTransitionTime], ['False', 'Silent', al.data.seenAt]);
});

test('Silent: from a recorded NodeSilent, whatever the grace', () => {
  const h = history(node);
  const al = h.alive();
  const seenAt = h.now().getTime();
  h.tick(grace + 1);
  h.silent(seenAt, grace);
  const moment = h.now().getTime();
  const v = nodeView(foldNodeEvents(node, h.events), moment, grace, recordedLivenessAt(h.events, moment, []));
  const c = cond(v, 'Connected');
  assert.deepEqual([c.status, c.reason, c.lastTransitionTime], ['False', 'Silent', al.data.seenAt]);
});

test('NeverSeen: no sign of life at all', () => {
  const h = history(node);
  h.send();
  const c = cond(view(h), 'Connected');
  assert.deepEqual([c.status, c.reason, c.lastTransitionTime], ['False', 'NeverSeen', null]);
});

test('NotObserved: no engine observed the moment, so Unknown', () => {
  const h = history(node);
  const al = h.alive();
  const start = h.now().getTime();
  h.tick(5000);
  const moment = h.now().getTime();
  // One observed span that ended before the moment asked about.
  const liveness = recordedLivenessAt(h.events, moment, [{ from: start - 1000, to: start + 1 }]);
  const c = cond(nodeView(foldNodeEvents(node, h.events), moment, grace, liveness), 'Connected');
  assert.deepEqual([c.status, c.reason, c.lastTransitionTime], ['Unknown', 'NotObserved', al.data.seenAt]);
});

after(() => {
  // Every reason of the closed list has a test above (and none is dead).
  assert.deepEqual([...seen].sort(), [...conditionReasons].sort());
});
