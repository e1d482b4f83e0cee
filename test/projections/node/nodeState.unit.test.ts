import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  foldNode,
  foldNodeEvents,
  initialNodeState,
  livenessAt,
  nodeView,
  sendHistoryLimit,
  serialOfSent,
  timeline,
} from '../../../projections/index.ts';
import type { NodeState } from '../../../projections/index.ts';
import type { Recorded } from '../../../src/core/events/index.ts';
import { history } from '../../support/history.ts';

const fold = (events: readonly Recorded[]): NodeState => foldNodeEvents('edge-07', events);

// The rule the mesh used before the digest (commit 43ee4d2a): "the latest report arrived after
// the latest send, so the node has caught up". Kept only here, as the counterexample.
function oldClockRuleSaysCaughtUp(events: readonly Recorded[]): boolean {
  const sends = events.filter((e) => e.type === 'DeclarationSent');
  const reports = events.filter((e) => e.type === 'ReportReceived');
  const lastSend = sends.at(-1);
  const lastReport = reports.at(-1);
  return !!lastSend && !!lastReport && Date.parse(lastReport.data.receivedAt) >= Date.parse(lastSend.data.sentAt);
}

test('a report for the previous declaration that lands after the next send leaves the node behind', () => {
  const h = history('edge-07');
  const a = h.send([{ id: 'web' }]);
  h.tick(200); // the node starts applying A
  const b = h.send([{ id: 'web' }, { id: 'db' }]);
  h.tick(300); // A's apply finishes after B was sent; its report lands now
  h.report({ applied: ['web'], declared: a.data.digest });

  const afterStale = fold(h.events);
  assert.equal(afterStale.caughtUp, false);
  assert.equal(afterStale.status, 'behind');
  assert.equal(afterStale.anomalies.stale, 1);
  assert.equal(afterStale.reported?.class, 'stale');
  assert.equal(afterStale.sent?.digest, b.data.digest);
  assert.equal(oldClockRuleSaysCaughtUp(h.events), true, 'the clock rule would have called this node caught up with words it had not read');

  h.tick(500);
  h.report({ applied: ['web', 'db'], declared: b.data.digest });
  const afterB = fold(h.events);
  assert.equal(afterB.caughtUp, true);
  assert.equal(afterB.status, 'converged');
  assert.equal(afterB.convergence.lastLatencyMs, 800);
  assert.equal(afterB.convergence.superseded, 1, 'A was replaced before any report named it');
});

test('A, B, A re-sent: the third send has a new digest and a late report of the first A never catches it up', () => {
  const h = history('edge-07');
  const spec = [{ id: 'web', ports: [8080] }];
  const a1 = h.send(spec);
  h.tick();
  h.send([{ id: 'db' }]);
  h.tick();
  const a3 = h.send(spec);
  assert.notEqual(a3.data.digest, a1.data.digest);
  h.tick();
  h.report({ applied: ['web'], declared: a1.data.digest });
  const s = fold(h.events);
  assert.equal(s.caughtUp, false);
  assert.equal(s.status, 'behind');
  assert.equal(s.anomalies.stale, 1);
  h.report({ applied: ['web'], declared: a3.data.digest });
  assert.equal(fold(h.events).status, 'converged');
});

test('a node that refused the declaration whole is caught up but refused', () => {
  const h = history('edge-07');
  const a = h.send();
  h.report({ refused: 'signature does not verify', declared: a.data.digest });
  const s = fold(h.events);
  assert.equal(s.caughtUp, true);
  assert.equal(s.status, 'refused');
});

test('a failed resource makes a caught-up node degraded', () => {
  const h = history('edge-07');
  const a = h.send([{ id: 'web' }, { id: 'db' }]);
  h.report({ applied: ['web'], failed: { db: 'port 5432 held by the store' }, declared: a.data.digest });
  const s = fold(h.events);
  assert.equal(s.caughtUp, true);
  assert.equal(s.status, 'degraded');
  assert.deepEqual(s.missing, []);
});

test('a declared resource that is neither applied nor failed makes the node degraded and is named missing', () => {
  const h = history('edge-07');
  const a = h.send([{ id: 'web' }, { id: 'db' }, { id: 'cache' }]);
  h.report({ applied: ['web'], failed: { db: 'no' }, declared: a.data.digest });
  const s = fold(h.events);
  assert.equal(s.status, 'degraded');
  assert.deepEqual(s.missing, ['cache']);
});

test('a legacy report without declared is recorded, counted undeclared, and never catches a node up', () => {
  const h = history('edge-07');
  h.send();
  h.tick();
  h.report({ applied: ['web'] });
  const s = fold(h.events);
  assert.equal(s.caughtUp, false);
  assert.equal(s.status, 'behind');
  assert.equal(s.anomalies.undeclared, 1);
  assert.equal(s.reported?.class, 'undeclared');
  assert.deepEqual(s.reported?.applied, ['web']);
});

test('a report naming a digest never sent to this node is counted unknown and leaves it behind', () => {
  const h = history('edge-07');
  h.send();
  h.report({ applied: ['web'], declared: 'f'.repeat(64) });
  const s = fold(h.events);
  assert.equal(s.status, 'behind');
  assert.equal(s.anomalies.unknown, 1);
  assert.equal(s.anomalies.stale, 0);
});

test('a digest sent to another node is unknown here, not stale', () => {
  const other = history('edge-08');
  const theirs = other.send();
  const h = history('edge-07');
  h.send();
  h.report({ declared: theirs.data.digest });
  assert.equal(fold(h.events).anomalies.unknown, 1);
});

test('the state keeps the last 8 sends: a report seven sends late is stale, one eight sends late counts as unknown', () => {
  const h = history('edge-07');
  const sends = Array.from({ length: 9 }, (_, i) => h.send([{ id: `r${i}` }]));
  h.tick();
  h.report({ declared: sends[1]!.data.digest });
  const within = fold(h.events);
  assert.equal(within.reported?.class, 'stale');
  assert.equal(within.earlierSends.length, sendHistoryLimit - 1);
  h.report({ declared: sends[0]!.data.digest });
  const beyond = fold(h.events);
  assert.equal(beyond.reported?.class, 'unknown', 'older than the kept history: the docs/design.md rule');
  assert.deepEqual(beyond.anomalies, { stale: 1, unknown: 1, undeclared: 0 });
  assert.equal(beyond.status, 'behind');
  assert.equal(serialOfSent(beyond, sends[8]!.data.digest), 9);
  assert.equal(serialOfSent(beyond, sends[1]!.data.digest), 2);
  assert.equal(serialOfSent(beyond, sends[0]!.data.digest), null);
});

test('duplicate delivery of the same report changes nothing', () => {
  const h = history('edge-07');
  const a = h.send();
  const r = h.report({ applied: ['web'], declared: a.data.digest });
  const once = fold(h.events);
  const twice = foldNode(once, r);
  assert.deepEqual(twice, once);
  assert.equal(twice.reports, 1);
});

test('a report before any send is recorded, and the node stays undeclared', () => {
  const h = history('edge-07');
  h.report({ applied: ['web'], declared: 'a'.repeat(64), carried: [4222] });
  const s = fold(h.events);
  assert.equal(s.status, 'undeclared');
  assert.equal(s.caughtUp, false);
  assert.equal(s.anomalies.unknown, 1);
  assert.deepEqual(s.carried, [4222]);
  assert.notEqual(s.reported, null);
});

test('carried ports are held from the latest report', () => {
  const h = history('edge-07');
  h.report({ carried: [4222, 5672] });
  assert.deepEqual(fold(h.events).carried, [4222, 5672]);
  h.report({ carried: [5432] });
  assert.deepEqual(fold(h.events).carried, [5432]);
});

test('position and revision follow the last event folded; undeclared is the initial state', () => {
  const s0 = initialNodeState('edge-07');
  assert.equal(s0.status, 'undeclared');
  assert.equal(s0.revision, -1n);
  const h = history('edge-07');
  h.send();
  h.alive();
  const s = fold(h.events);
  assert.equal(s.revision, 1n);
  assert.equal(s.position, h.events[1]!.position);
  assert.equal(nodeView(s, h.now()).position, s.position.toString());
});

test('liveness: never seen, connected, and disconnected for the right time', () => {
  const h = history('edge-07');
  const now = h.now().getTime();
  assert.deepEqual(livenessAt(null, now), { state: 'never-seen', lastSeenAt: null, disconnectedForMs: 0 });
  h.alive();
  const seen = fold(h.events).lastSeenAt;
  assert.equal(livenessAt(seen, now + 59_000, 60_000).state, 'connected');
  assert.equal(livenessAt(seen, now + 60_000, 60_000).state, 'connected');
  assert.deepEqual(livenessAt(seen, now + 90_000, 60_000), { state: 'disconnected', lastSeenAt: seen, disconnectedForMs: 90_000 });
});

test('a converged node that has gone silent is reported as converged and disconnected, never simply current', () => {
  const h = history('edge-07');
  const a = h.send();
  h.tick();
  h.report({ applied: ['web'], declared: a.data.digest });
  const s = fold(h.events);
  const month = 30 * 24 * 3600 * 1000;
  const view = nodeView(s, h.now().getTime() + month);
  assert.equal(view.status, 'converged');
  assert.equal(view.liveness.state, 'disconnected');
  assert.equal(view.liveness.disconnectedForMs, month);
});

test('a report is a sign of life: lastSeenAt is the newer of alive and report', () => {
  const h = history('edge-07');
  h.alive();
  h.tick(5000);
  const r = h.report({});
  assert.equal(fold(h.events).lastSeenAt, r.data.receivedAt);
});

test('a report naming a digest older than the kept history is stale when ingest found its send, unknown when it found none', () => {
  const h = history('edge-07');
  const sends = Array.from({ length: 20 }, (_, i) => h.send([{ id: `r${i}` }]));
  h.tick();
  const first = sends[0]!.data;
  const r1 = h.report({ declared: first.digest });
  const found = { ...r1, data: { ...r1.data, sentEarlier: { serial: first.serial, sentAt: first.sentAt } } };
  const events = [...h.events.slice(0, -1), found];
  const s = fold(events);
  assert.equal(s.reported?.class, 'stale', 'ever sent to this node: stale, however long ago');
  assert.equal(s.reported?.declared, first.digest);
  assert.deepEqual(s.anomalies, { stale: 1, unknown: 0, undeclared: 0 });
  assert.equal(s.earlierSends.length, sendHistoryLimit - 1, 'the history stays bounded');
  const line = timeline('edge-07', events).entries.at(-1)!;
  assert.equal(line.class, 'stale');
  assert.equal(line.serial, 1, 'the timeline names the declaration the report is about');

  const never = 'f'.repeat(64);
  const r2 = h.report({ declared: never });
  const notFound = { ...r2, data: { ...r2.data, sentEarlier: null } };
  assert.equal(fold([...events, notFound]).reported?.class, 'unknown', 'never sent to this node');
});

test('a report stored before ingest recorded sentEarlier folds as it always did: older than the history, unknown', () => {
  const h = history('edge-07');
  const sends = Array.from({ length: 20 }, (_, i) => h.send([{ id: `r${i}` }]));
  h.tick();
  h.report({ declared: sends[0]!.data.digest });
  const s = fold(h.events);
  assert.equal(s.reported?.class, 'unknown');
  assert.equal(timeline('edge-07', h.events).entries.at(-1)!.serial, null);
});
