import assert from 'node:assert/strict';
import { test } from 'node:test';
import { generateSigningKey } from '../../src/core/declaration/index.ts';
import { createIngest } from '../../src/engine/ingest/index.ts';
import { createMetrics } from '../../src/metrics.ts';
import { createRelay } from '../../src/engine/relay.ts';
import { createSender } from '../../src/engine/send.ts';
import { isConvergeError } from '../../src/core/errors.ts';
import { streamOf } from '../../src/core/events/index.ts';
import { createSimulatedNode } from '../../src/simulation/simulatedNode.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { createInProcessBroker } from '../../src/transport/inProcess.ts';
import { encodeAlive, encodeReport } from '../../src/core/wire/index.ts';
import { foldNodeEvents } from '../../projections/index.ts';
import type { NodeState } from '../../projections/index.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';

// The engine's transport pieces on the in-process broker: same ports as AMQP, no broker.

const fold = async (store: EventStore, node: string): Promise<NodeState> => foldNodeEvents(node, await store.readStream(streamOf(node)));

function rig(options: { trustMissingUserId?: boolean; aliveResolutionMs?: number; now?: () => Date } = {}) {
  const store = createMemoryEventStore();
  const broker = createInProcessBroker();
  const key = generateSigningKey();
  const metrics = createMetrics();
  const ingest = createIngest({ store, source: broker.ingestSource(), logger, metrics, flushMs: 1, ...options });
  const relay = createRelay({ store, publisher: broker.declarationPublisher(), logger, metrics });
  const sender = createSender({ store, key });
  return { store, broker, key, metrics, ingest, relay, sender };
}

test('a report for the previous declaration that lands after the next send leaves the node behind, then converges', async () => {
  const { store, broker, key, ingest, relay, sender } = rig();
  await ingest.start();
  relay.start();
  const node = createSimulatedNode({ link: broker.nodeLink('n1'), verifyingKey: key, logger, applyDelayMs: 100 });
  await node.start();
  const a = await sender.send('n1', [{ id: 'web', image: 'a' }]);
  await until('A applying', async () => broker.depth()['node.n1'] === 1 || node.applied().length > 0);
  const b = await sender.send('n1', [{ id: 'web', image: 'b' }]);
  const afterA = await until('report about A', async () => {
    const s = await fold(store, 'n1');
    return s.reported?.declared === a.digest ? s : null;
  });
  assert.equal(afterA.status, 'behind');
  assert.equal(afterA.reported?.class, 'stale');
  const afterB = await until('report about B', async () => {
    const s = await fold(store, 'n1');
    return s.reported?.declared === b.digest ? s : null;
  });
  assert.equal(afterB.status, 'converged');
  assert.deepEqual(node.applied(), [a.digest, b.digest]);
  await node.stop();
  await relay.stop();
  await ingest.stop();
});

test('hostile messages are dead-lettered with their code and never stored; ingest goes on', async () => {
  const { store, broker, metrics, ingest } = rig();
  await ingest.start();
  broker.inject('report', Buffer.from('not json'), { userId: 'n1' });
  broker.inject('report', Buffer.from('{"node":"n1","applied":"web"}'), { userId: 'n1' });
  broker.inject('report', encodeReport({ node: 'n1', applied: [], failed: {}, refused: '', carried: [], declared: null }), {});
  broker.inject('report', encodeReport({ node: 'n1', applied: [], failed: {}, refused: '', carried: [], declared: null }), {
    userId: 'n2',
  });
  broker.inject('alive', Buffer.alloc(300 * 1024, 0x20), { userId: 'n1' });
  broker.inject('report', encodeReport({ node: 'n1', applied: ['ok'], failed: {}, refused: '', carried: [], declared: null }), {
    userId: 'n1',
    messageId: 'm-ok',
  });
  await until('the good report stored', async () => (await store.readStream(streamOf('n1'))).length === 1);
  await until('five dead letters', async () => broker.deadLetters().length === 5);
  assert.deepEqual(
    broker.deadLetters().map((d) => d.code),
    [
      'CONVERGE_ERR_WIRE_NOT_JSON',
      'CONVERGE_ERR_WIRE_SCHEMA',
      'CONVERGE_ERR_USER_ID_MISSING',
      'CONVERGE_ERR_USER_ID_MISMATCH',
      'CONVERGE_ERR_WIRE_TOO_LARGE',
    ],
  );
  const stored = await store.readStream(streamOf('n1'));
  assert.equal(stored[0]?.type, 'ReportReceived');
  assert.equal((await metrics.registry.getSingleMetric('converge_ingest_rejected_total')?.get())?.values.length, 5);
  await ingest.stop();
});

test('with trustMissingUserId a report without user_id is accepted, a mismatched one still refused', async () => {
  const { store, broker, ingest } = rig({ trustMissingUserId: true });
  await ingest.start();
  const r = encodeReport({ node: 'n1', applied: [], failed: {}, refused: '', carried: [], declared: null });
  broker.inject('report', r, { messageId: 'a' });
  broker.inject('report', r, { messageId: 'b', userId: 'mallory' });
  await until(
    'one stored, one dead',
    async () => (await store.readStream(streamOf('n1'))).length === 1 && broker.deadLetters().length === 1,
  );
  assert.equal(broker.deadLetters()[0]?.code, 'CONVERGE_ERR_USER_ID_MISMATCH');
  await ingest.stop();
});

test('alive is coalesced to one event per node per resolution, the first after a gap always kept', async () => {
  let t = Date.parse('2026-01-01T00:00:00Z');
  const { store, broker, ingest } = rig({ aliveResolutionMs: 15_000, now: () => new Date(t) });
  await ingest.start();
  const alive = encodeAlive({ node: 'n1' });
  const at = async (ms: number): Promise<void> => {
    t = Date.parse('2026-01-01T00:00:00Z') + ms;
    broker.inject('alive', alive, { userId: 'n1' });
    await until('delivered', async () => ingest.lastSeenAt('n1')?.getTime() === t);
  };
  for (const ms of [0, 5_000, 14_999, 15_000, 20_000, 60_000]) await at(ms);
  await until('flushed', async () => ingest.stats().pending === 0 && ingest.stats().acked === 6);
  const seenAt = (await store.readStream(streamOf('n1'))).map((e) => (e.type === 'AliveSeen' ? e.data.seenAt : null));
  assert.deepEqual(seenAt, ['2026-01-01T00:00:00.000Z', '2026-01-01T00:00:15.000Z', '2026-01-01T00:01:00.000Z']);
  assert.equal(ingest.lastSeenAt('n1')?.toISOString(), '2026-01-01T00:01:00.000Z');
  await ingest.stop();
});

test('while the store refuses writes nothing is acked; once it recovers everything is stored once', async () => {
  const inner = createMemoryEventStore();
  let down = true;
  const store: EventStore = {
    ...inner,
    kind: inner.kind,
    append: (w) => (down ? Promise.reject(new Error('disk gone')) : inner.append(w)),
  };
  const broker = createInProcessBroker();
  const ingest = createIngest({ store, source: broker.ingestSource(), logger, flushMs: 1, retry: { minMs: 5, maxMs: 20 } });
  await ingest.start();
  const link = broker.nodeLink('n1');
  for (let i = 0; i < 20; i++)
    await link.publish(
      'report',
      encodeReport({ node: 'n1', applied: [String(i)], failed: {}, refused: '', carried: [], declared: null }),
      `m${i}`,
    );
  await until('append failing', async () => !ingest.isHealthy());
  assert.equal(ingest.stats().acked, 0);
  assert.equal(broker.depth()['mesh.reports'], 20);
  down = false;
  await until('all acked', async () => ingest.stats().acked === 20);
  assert.equal((await inner.readStream(streamOf('n1'))).length, 20);
  assert.equal(broker.depth()['mesh.reports'], 0);
  await ingest.stop();
});

test('two concurrent sends of the same spec in the same second are two sends with two serials and two digests', async () => {
  const { store, key } = rig();
  // A frozen clock makes both builds of serial 1 byte-identical: same id, same digest.
  const frozen = createSender({ store, key, now: () => new Date('2026-11-29T14:02:00Z') });
  const [x, y] = await Promise.all([frozen.send('n1', [{ id: 'a' }]), frozen.send('n1', [{ id: 'a' }])]);
  assert.deepEqual([x.serial, y.serial].sort(), [1, 2]);
  assert.notEqual(x.digest, y.digest);
  assert.equal((await store.readStream(streamOf('n1'))).length, 2);
});

test('two concurrent sends take consecutive serials; a carried port is refused', async () => {
  const { store, sender, key } = rig();
  const [x, y] = await Promise.all([sender.send('n1', [{ id: 'a' }]), sender.send('n1', [{ id: 'b' }])]);
  assert.deepEqual([x.serial, y.serial].sort(), [1, 2]);
  assert.notEqual(x.digest, y.digest);
  const events = await store.readStream(streamOf('n1'));
  assert.deepEqual(events.map((e) => (e.type === 'DeclarationSent' ? e.data.digest : null)).sort(), [x.digest, y.digest].sort());
  const withPorts = createSender({ store, key, loadNode: async () => ({ revision: 1n, carried: [8080], sent: null }) });
  await assert.rejects(withPorts.send('n1', [{ id: 'web', ports: [8080] }]), (e) => isConvergeError(e, 'CONVERGE_ERR_PORT_CARRIED'));
});
