import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { createNotifier, parseNotifyConfig } from '../../src/notify/index.ts';
import { createProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { historyInStore } from '../support/history.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';
import { startReceiver } from './receiver.ts';

// The watch's start (a restart) judges the nodes it finds by the record (docs/design.md §3
// "Liveness as recorded"): a node that stays alive appends nothing after its NodeHeard, so its
// folded last-seen time may be days old while it is alive. Only a NodeSilent says it went quiet.

const cleanup: (() => Promise<void>)[] = [];
after(async () => {
  for (const c of cleanup.reverse()) await c();
});

test('after a restart, a node heard long ago with no NodeSilent since is not notified disconnected', async () => {
  const store = createMemoryEventStore();
  const receiver = await startReceiver();
  cleanup.push(() => receiver.close());
  const h = historyInStore(store);
  // Both heard a week before the wall clock reads now; only d1 was recorded silent since.
  await h.heard('alive-1');
  await h.heard('d1');
  await h.silent('d1', h.now().getTime(), 60_000);

  const runner = createProjectionRunner({ store, logger });
  cleanup.push(() => runner.stop());
  await runner.start();
  await runner.caughtUp();
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
  await notifier.prepare();
  // As after a snapshot restore: the states are there when the watch begins.
  await notifier.begin();
  clock.mono = 900_001;
  const nodes = (): string[] => receiver.received.flatMap((m) => m.json.data.notifications.map((n) => `${n.trigger}:${n.node ?? ''}`));
  await until('d1 notified', () => nodes().includes('node.disconnected:d1'));
  const from = notifier.watch!.checks();
  await until('two more checks', () => notifier.watch!.checks() >= from + 2);
  await until('deliveries settled', () => notifier.destinations[0]!.stats().queued === 0);
  assert.deepEqual(nodes().sort(), ['node.disconnected:d1'], 'alive-1 is heard by the record');
});
