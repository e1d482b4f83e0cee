import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { TestContext } from 'node:test';
import { makeObservationStarted, makeObservationStopped } from '../../src/core/events/index.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { historyInStore, recordObservation } from '../support/history.ts';
import { serveInProcess } from '../support/serveInProcess.ts';
import { readSse } from '../support/sse.ts';
import { until } from '../support/until.ts';

// docs/design.md §3 "Not observed": a `serve` without --amqp observes nothing, so its current view
// (node, list, fleet, gauges, SSE) says what `?at=now` says: not-observed once the record shows no
// engine observing now, with the last sign of life kept and the reason given.

const read = { authorization: 'Bearer reader-token' };

type Liveness = { state: string; lastSeenAt: string | null; disconnectedForMs: number; reason?: string };
type NodeBody = { liveness: Liveness; conditions: { type: string; status: string; message: string }[] };
type Fleet = { byLiveness: Record<string, number>; observation?: { observed: boolean; reason: string | null } };

/** serve with no transport over `store`, its clock at `now`; stopped, and the store closed, after the test. */
const serveWithoutIngest = (t: TestContext, store: EventStore, now: number) =>
  serveInProcess(t, store, { settings: { apiTokens: 'reader-token:read' }, driveRollouts: false, now: () => now });

async function storeObservedThenStopped(): Promise<{ store: EventStore; now: number }> {
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  await recordObservation(store, makeObservationStarted('engine-a', h.now().getTime(), 60_000, null));
  h.tick();
  await h.send('node-heard');
  await h.heard('node-heard');
  await h.report('node-heard', { declared: h.digests('node-heard')[0]!, applied: ['web'] });
  await h.send('node-silent');
  const silentSeen = h.tick().getTime();
  await h.heard('node-silent');
  h.tick(61_000);
  await h.silent('node-silent', silentSeen, 60_000);
  await h.send('node-never');
  h.tick(10 * 60_000);
  await recordObservation(store, makeObservationStopped('engine-a', h.now().getTime(), 'stopped'));
  // An hour later this serve starts, with no broker.
  return { store, now: h.tick(60 * 60_000).getTime() };
}

test('serve without --amqp: the current view says not-observed as ?at=now does, and why', async (t) => {
  const { store, now } = await storeObservedThenStopped();
  const { engine, url } = await serveWithoutIngest(t, store, now);
  await until('the read model to fold the store', () => engine.runner.readModel.size() === 3);
  const get = async <T>(path: string): Promise<T> => {
    const r = await engine.app.inject({ method: 'GET', url: path, headers: read });
    assert.equal(r.statusCode, 200, `${path}: ${r.body}`);
    return r.json() as T;
  };
  const atNow = new Date(now).toISOString();

  for (const node of ['node-heard', 'node-silent', 'node-never']) {
    const live = await get<NodeBody>(`/v1/nodes/${node}`);
    const asOf = await get<{ state: { liveness: Liveness } }>(`/v1/nodes/${node}/state?at=${atNow}`);
    assert.equal(asOf.state.liveness.state, 'not-observed', `${node}: the record says no engine observes now`);
    assert.deepEqual(
      { state: live.liveness.state, lastSeenAt: live.liveness.lastSeenAt, disconnectedForMs: live.liveness.disconnectedForMs },
      asOf.state.liveness,
      `${node}: the current view agrees with ?at=now`,
    );
    assert.match(live.liveness.reason ?? '', /without --amqp/, `${node}: says why`);
    const c = live.conditions.find((x) => x.type === 'Connected');
    assert.equal(c?.status, 'Unknown');
    assert.match(c?.message ?? '', /does not observe liveness \(started without --amqp\)/);
  }

  const fleet = await get<Fleet>('/v1/fleet');
  const fleetAt = await get<Fleet>(`/v1/fleet?at=${atNow}`);
  assert.deepEqual(fleet.byLiveness, fleetAt.byLiveness, 'the fleet now agrees with the fleet ?at=now');
  assert.equal(fleet.observation?.observed, false);
  assert.match(fleet.observation?.reason ?? '', /without --amqp/, 'the reason the dashboard shows');

  const listed = await get<{ total: number; nodes: { liveness: Liveness }[] }>('/v1/nodes?liveness=not-observed');
  assert.equal(listed.total, 3, 'the liveness filter sees what the nodes show');
  assert.equal((await get<{ total: number }>('/v1/nodes?liveness=disconnected')).total, 0);

  const metrics = await engine.app.inject({ method: 'GET', url: '/metrics' });
  const gauge = (liveness: string): number =>
    [...metrics.body.matchAll(new RegExp(`^converge_nodes\\{[^}]*liveness="${liveness}"[^}]*\\} (\\d+)$`, 'gm'))].reduce(
      (sum, m) => sum + Number(m[1]),
      0,
    );
  assert.deepEqual(
    { notObserved: gauge('not-observed'), disconnected: gauge('disconnected'), neverSeen: gauge('never-seen') },
    { notObserved: 3, disconnected: 0, neverSeen: 0 },
    'the gauges count the nodes as the API shows them',
  );

  // SSE resumed from the start sends every node's current state.
  const res = await fetch(`${url}/v1/events`, { headers: { ...read, 'last-event-id': '0' } });
  const events = await readSse<{ node: string; liveness: Liveness }>(res, (es) => es.filter((e) => e.event === 'node').length >= 3);
  for (const e of events.filter((x) => x.event === 'node')) assert.equal(e.data.liveness.state, 'not-observed', e.data.node);
});

test('serve without --amqp: once an engine observes again, the current view judges again as the start is folded', async (t) => {
  const { store, now } = await storeObservedThenStopped();
  const { engine } = await serveWithoutIngest(t, store, now);
  await until('the read model to fold the store', () => engine.runner.readModel.size() === 3);
  const fleet = async (): Promise<Fleet> => (await engine.app.inject({ method: 'GET', url: '/v1/fleet', headers: read })).json() as Fleet;
  assert.equal((await fleet()).byLiveness['not-observed'], 3);

  // Another engine on the same store starts observing: its span is open now.
  await recordObservation(store, makeObservationStarted('engine-b', now - 1_000, 60_000, null));
  // Folding the start is enough, with no request to ask (an open event stream's next node event is right).
  await until('the view to hear of the start', () => engine.runner.readModel.unobserved() === null);
  const f = await fleet();
  assert.deepEqual(f.observation, { observed: true, reason: null });
  assert.equal(f.byLiveness['not-observed'], 0, 'judged again');
  const node = (await engine.app.inject({ method: 'GET', url: '/v1/nodes/node-silent', headers: read })).json() as NodeBody;
  assert.equal(node.liveness.state, 'disconnected');
  assert.equal(node.liveness.reason, undefined);
});

test('serve without --amqp while another engine observes: the current view follows the recorded transitions, as ?at=now does', async (t) => {
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  await recordObservation(store, makeObservationStarted('engine-b', h.now().getTime(), 60_000, null));
  h.tick();
  await h.send('node-alive');
  await h.heard('node-alive');
  await h.send('node-gone');
  const goneSeen = h.tick().getTime();
  await h.heard('node-gone');
  h.tick(61_000);
  await h.silent('node-gone', goneSeen, 60_000);
  await h.send('node-old'); // never heard: the grace rule, in both
  // engine-b still observes ten minutes on; node-alive stayed alive, so it recorded nothing more.
  const now = h.tick(10 * 60_000).getTime();
  const { engine } = await serveWithoutIngest(t, store, now);
  await until('the read model to fold the store', () => engine.runner.readModel.size() === 3);
  const get = async <T>(path: string): Promise<T> => (await engine.app.inject({ method: 'GET', url: path, headers: read })).json() as T;
  const atNow = new Date(now).toISOString();
  for (const node of ['node-alive', 'node-gone', 'node-old']) {
    const live = await get<NodeBody>(`/v1/nodes/${node}`);
    const asOf = await get<{ state: { liveness: Liveness } }>(`/v1/nodes/${node}/state?at=${atNow}`);
    assert.deepEqual(live.liveness, asOf.state.liveness, `${node}: the current view agrees with ?at=now`);
  }
  const fleet = await get<Fleet>('/v1/fleet');
  assert.deepEqual(fleet.byLiveness, (await get<Fleet>(`/v1/fleet?at=${atNow}`)).byLiveness);
  assert.deepEqual(fleet.byLiveness, { connected: 1, disconnected: 1, 'never-seen': 1, 'not-observed': 0 });
  assert.equal((await get<{ total: number }>('/v1/nodes?liveness=connected')).total, 1);

  // Folded as it lands (not in the start's catch-up): engine-b records node-alive silent.
  // Observed a second before this serve's now: at the very instant of a silence the fleet's history
  // (fleetPresence.ts) still counts the node connected while state?at= says disconnected.
  h.tick(-1_000);
  await h.silent('node-alive', goneSeen - 1_000, 60_000);
  await until(
    'node-alive to read disconnected',
    async () => (await get<NodeBody>('/v1/nodes/node-alive')).liveness.state === 'disconnected',
  );
  assert.deepEqual((await get<Fleet>('/v1/fleet')).byLiveness, (await get<Fleet>(`/v1/fleet?at=${atNow}`)).byLiveness);
  assert.equal((await get<{ total: number }>('/v1/nodes?liveness=connected')).total, 0);
});

// With ingest (an in-process broker here), a node that falls silent while the engine still consumes
// is recorded NodeSilent by this engine's sweep: the current view and ?at=now both read disconnected
// (docs/design.md §3: the engine's span stays open, so the record judges; a lost broker closes it).
test('serve with a transport that hears nothing more: the current view and ?at=now agree on disconnected', async (t) => {
  const { engine, broker } = await serveInProcess(t, createMemoryEventStore(), {
    settings: { apiTokens: 'reader-token:read', graceMs: '400', lastSeenFlushMs: '100' },
    broker: 'in-process',
    driveRollouts: false,
  });
  await broker.nodeLink('node-x').publish('alive', Buffer.from(JSON.stringify({ node: 'node-x' })), 'alive-1');
  const get = async <T>(path: string): Promise<T> => (await engine.app.inject({ method: 'GET', url: path, headers: read })).json() as T;
  await until('node-x to be heard', () => (engine.runner.readModel.get('node-x')?.lastSeenAt ?? null) !== null);
  // Nothing more arrives: the sweep records the silence once the grace has passed.
  await until('the record to say disconnected', async () => {
    const r = await get<{ state?: { liveness: Liveness } }>(`/v1/nodes/node-x/state?at=${new Date().toISOString()}`);
    return r.state?.liveness.state === 'disconnected';
  });
  assert.equal((await get<NodeBody>('/v1/nodes/node-x')).liveness.state, 'disconnected');
  const fleet = await get<Fleet>('/v1/fleet');
  assert.deepEqual(fleet.observation, { observed: true, reason: null });
  assert.equal(fleet.byLiveness.disconnected, 1);
});
