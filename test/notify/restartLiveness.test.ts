import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { createNotifier, parseNotifyConfig } from '../../src/notify/index.ts';
import type { Notifier } from '../../src/notify/index.ts';
import { createProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import type { ProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { historyInStore } from '../support/history.ts';
import { logger } from '../support/logger.ts';
import { tempDir } from '../support/tempDir.ts';
import { until } from '../support/until.ts';
import { startReceiver } from './receiver.ts';
import type { Receiver } from './receiver.ts';

// The watch's start (a restart) judges the nodes it finds by the record (docs/design.md §3
// "Liveness as recorded"): a node that stays alive appends nothing after its NodeHeard, so its
// folded last-seen time may be days old while it is alive. Only a NodeSilent says it went quiet.

const cleanup: (() => Promise<void>)[] = [];
after(async () => {
  for (const c of cleanup.reverse()) await c();
});

/** alive-1 heard a week before the wall clock's now and never recorded silent since; d1 recorded silent. */
async function fleet(): Promise<EventStore> {
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  await h.heard('alive-1');
  await h.heard('d1');
  await h.silent('d1', h.now().getTime(), 60_000);
  return store;
}

type Watching = Readonly<{ notifier: Notifier; receiver: Receiver; clock: { mono: number } }>;

async function watching(store: EventStore, runner: ProjectionRunner): Promise<Watching> {
  const receiver = await startReceiver();
  cleanup.push(() => receiver.close());
  const clock = { mono: 0 };
  const notifier = createNotifier({
    config: parseNotifyConfig(
      JSON.stringify({
        destinations: [{ name: 'hook', kind: 'webhook', url: receiver.url, retry: { minMs: 10, maxMs: 100 } }],
        watch: { disconnectedMs: 900_000, checkMs: 10 },
      }),
      'test.json',
    ),
    store,
    readModel: runner.readModel,
    logger,
    mono: () => clock.mono,
    graceMs: 60_000,
  });
  cleanup.push(() => notifier.stop());
  return { notifier, receiver, clock };
}

/** What is notified once the threshold has passed: d1 first, then two checks more and every delivery settled. */
async function notifiedPastThreshold({ notifier, receiver, clock }: Watching): Promise<string[]> {
  clock.mono = 900_001;
  const nodes = (): string[] => receiver.received.flatMap((m) => m.json.data.notifications.map((n) => `${n.trigger}:${n.node ?? ''}`));
  await until('d1 notified', () => nodes().includes('node.disconnected:d1'));
  const from = notifier.watch!.checks();
  await until('two more checks', () => notifier.watch!.checks() >= from + 2);
  await until('deliveries settled', () => notifier.destinations[0]!.stats().queued === 0);
  return nodes().sort();
}

test('after a restart, a node heard long ago with no NodeSilent since is not notified disconnected', async () => {
  const store = await fleet();
  const runner = createProjectionRunner({ store, logger });
  cleanup.push(() => runner.stop());
  await runner.start();
  await runner.caughtUp();
  const w = await watching(store, runner);
  await w.notifier.prepare();
  // The states are there when the watch begins, as after a restore.
  await w.notifier.begin();
  assert.deepEqual(await notifiedPastThreshold(w), ['node.disconnected:d1'], 'alive-1 is heard by the record');
});

test('after a restart from a snapshot, the same: the snapshot keeps each node its latest transition', async (t) => {
  const store = await fleet();
  const snapshot = { path: join(tempDir(t, 'converge-notify-restart-'), 'store.snapshot'), everyEvents: 1_000_000 };
  const before = createProjectionRunner({ store, logger, snapshot });
  await before.start();
  await before.caughtUp();
  await before.writeSnapshot();
  await before.stop();

  // In serve's order (src/app/lifecycle.ts): prepare, the runner's start (its restore), begin.
  const runner = createProjectionRunner({ store, logger, snapshot });
  cleanup.push(() => runner.stop());
  const w = await watching(store, runner);
  await w.notifier.prepare();
  await runner.start();
  assert.equal(runner.readModel.position(), await store.headPosition(), 'restored from the snapshot');
  await w.notifier.begin();
  assert.deepEqual(await notifiedPastThreshold(w), ['node.disconnected:d1'], 'alive-1 is heard by the record');
});
