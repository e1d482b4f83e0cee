import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import type { ComponentHealth } from '../../src/engine/health.ts';
import { createNotifier, parseNotifyConfig } from '../../src/notify/index.ts';
import type { Notifier } from '../../src/notify/index.ts';
import { createProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import type { ProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { historyInStore } from '../support/history.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';
import { startReceiver } from './receiver.ts';
import type { Receiver } from './receiver.ts';

// The triggers on time alone and on health, delivered to a real HTTP receiver: a node behind or
// disconnected past its threshold, ingest or the relay unhealthy past theirs. The monotonic clock
// is the test's (`mono`), the timer real: each fires once per episode, and a new notifier on the
// same store (a restart) does not fire it again.

const cleanup: (() => Promise<void>)[] = [];
after(async () => {
  for (const c of cleanup.reverse()) await c();
});

type Rig = { runner: ProjectionRunner; notifier: Notifier; stop: () => Promise<void> };
const clock = { mono: 0 };
const health: { ingest: ComponentHealth | null; relay: ComponentHealth | null } = { ingest: null, relay: null };

async function start(store: EventStore, receiver: Receiver, filter: Record<string, unknown> = {}): Promise<Rig> {
  const config = parseNotifyConfig(
    JSON.stringify({
      destinations: [{ name: 'hook', kind: 'webhook', url: receiver.url, retry: { minMs: 10, maxMs: 100 }, filter }],
      watch: { behindMs: 600_000, disconnectedMs: 900_000, unhealthyMs: 60_000, checkMs: 10 },
    }),
    'test.json',
  );
  const runner = createProjectionRunner({ store, logger });
  const notifier = createNotifier({
    config,
    store,
    readModel: runner.readModel,
    logger,
    mono: () => clock.mono,
    health: () => health,
    graceMs: 60_000,
  });
  await notifier.prepare();
  await runner.start();
  await notifier.begin();
  await runner.caughtUp();
  let stopped = false;
  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    await notifier.stop();
    await runner.stop();
  };
  cleanup.push(stop);
  return { runner, notifier, stop };
}

const got = (r: Receiver): string[] =>
  r.received.flatMap((m) =>
    m.json.data.notifications.map((n) => `${n.trigger}:${n.node ?? (n as { facts?: { component?: string } }).facts?.component ?? ''}`),
  );
/** Some checks made after now: the timer has looked at the clock as it is. */
const checked = async (n: Notifier): Promise<void> => {
  const from = n.watch!.checks();
  await until('two more checks', () => n.watch!.checks() >= from + 2);
};

test('a node behind and one disconnected past their thresholds: once each, and not again after a restart', async () => {
  const store = createMemoryEventStore();
  const receiver = await startReceiver();
  cleanup.push(() => receiver.close());
  clock.mono = 0;
  let rig = await start(store, receiver);
  const h = historyInStore(store);
  const { digest } = await h.send('b1');
  await h.alive('d1');
  const lastSeen = h.now().getTime();
  await h.silent('d1', lastSeen, 60_000);
  await until('folded', async () => rig.runner.readModel.position() === (await store.headPosition()));

  clock.mono = 599_000;
  await checked(rig.notifier);
  assert.deepEqual(got(receiver), [], 'nothing before a threshold');
  clock.mono = 600_001;
  await until('node.behind', () => got(receiver).includes('node.behind:b1'));
  clock.mono = 900_001;
  await until('node.disconnected', () => got(receiver).includes('node.disconnected:d1'));
  const behind = receiver.received.find((m) => m.json.data.notifications[0]!.trigger === 'node.behind')!;
  assert.match(behind.body, new RegExp(digest), 'the digest it is behind on');
  clock.mono = 5_000_000;
  await checked(rig.notifier);
  assert.deepEqual(got(receiver).sort(), ['node.behind:b1', 'node.disconnected:d1'], 'once per episode');

  // A restart: the episodes are still under way, the fired-state says they were sent.
  await rig.stop();
  clock.mono = 0;
  rig = await start(store, receiver);
  clock.mono = 10_000_000;
  await checked(rig.notifier);
  await until('deliveries settled', () => rig.notifier.destinations[0]!.stats().queued === 0);
  assert.equal(receiver.received.length, 2, 'nothing sent again after the restart');

  // A new episode (a newer declaration the node is behind on) fires again.
  await h.send('b1');
  await until('folded', async () => rig.runner.readModel.position() === (await store.headPosition()));
  clock.mono = 20_000_000;
  await until('the new episode', () => got(receiver).filter((g) => g === 'node.behind:b1').length === 2);
  await rig.stop();
});

test('ingest and the relay unhealthy past the threshold: once per failing spell; a filter keeps one out', async () => {
  const store = createMemoryEventStore();
  const receiver = await startReceiver();
  cleanup.push(() => receiver.close());
  clock.mono = 0;
  health.ingest = { healthy: true, lastSuccessAt: null, failingSince: null, error: null };
  health.relay = { healthy: true, lastSuccessAt: null, failingSince: null, error: null };
  let rig = await start(store, receiver, { triggers: ['relay.unhealthy', 'node.behind'] });
  await checked(rig.notifier);
  const since = new Date('2026-12-01T10:00:00Z');
  health.relay = { healthy: false, lastSuccessAt: null, failingSince: since, error: 'broker unreachable' };
  health.ingest = { healthy: false, lastSuccessAt: null, failingSince: since, error: 'CONVERGE_ERR_STORE_UNAVAILABLE: disk full' };
  await checked(rig.notifier);
  clock.mono = 59_000;
  await checked(rig.notifier);
  assert.equal(receiver.received.length, 0, 'not before the threshold');
  clock.mono = 61_000;
  await until('relay.unhealthy', () => got(receiver).includes('relay.unhealthy:relay'));
  clock.mono = 200_000;
  await checked(rig.notifier);
  assert.deepEqual(got(receiver), ['relay.unhealthy:relay'], 'once, and ingest filtered out');
  const facts = receiver.received[0]!.json.data.notifications[0] as unknown as { facts: { error: string } };
  assert.equal(facts.facts.error, 'broker unreachable');

  await rig.stop();
  clock.mono = 0;
  rig = await start(store, receiver, { triggers: ['relay.unhealthy'] });
  await checked(rig.notifier);
  clock.mono = 100_000;
  await checked(rig.notifier);
  assert.equal(receiver.received.length, 1, 'the same failing spell is not sent again after a restart');

  // Healthy, then failing again: a new episode.
  health.relay = { healthy: true, lastSuccessAt: new Date(), failingSince: null, error: null };
  await checked(rig.notifier);
  health.relay = { healthy: false, lastSuccessAt: null, failingSince: new Date('2026-12-01T11:00:00Z'), error: 'again' };
  await checked(rig.notifier);
  clock.mono = 300_000;
  await until('the second spell', () => receiver.received.length === 2);
  await rig.stop();
});
