import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { encodeReport } from '../../src/core/wire/index.ts';
import { createIngest } from '../../src/engine/ingest/index.ts';
import { createNotifier, parseNotifyConfig } from '../../src/notify/index.ts';
import { createProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { createInProcessBroker } from '../../src/transport/inProcess.ts';
import { historyInStore } from '../support/history.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';
import { startReceiver } from './receiver.ts';

// A receiver that takes 10 s to answer each request, while 1,000 reports arrive through the
// engine's ingest (in-process broker → parse → batch → append → ack) and fold: ingest and the
// fold finish with the first delivery still held, and the notifications then drain in order.
// Real time, no virtual clock: the 10 s are the receiver's own, as a slow one would take them.

const cleanup: (() => Promise<void>)[] = [];
after(async () => {
  for (const c of cleanup.reverse()) await c();
});

test('a receiver that answers in 10 s holds up neither ingest nor the fold of 1,000 reports; then all drain in order', async () => {
  const n = 1_000;
  const receiver = await startReceiver();
  // Each request answered no sooner than 10 s after it arrived; the first also not before the
  // checks below, so "still held" does not depend on how fast a loaded machine ingests.
  receiver.holdMs = 10_000;
  receiver.hold = true;
  const config = parseNotifyConfig(
    JSON.stringify({
      destinations: [
        {
          name: 'slow',
          kind: 'webhook',
          url: receiver.url,
          timeoutMs: 60_000,
          // One message alone, then the rest of the wave as one summary naming them all (coalescing).
          coalesce: { windowMs: 15_000, maxPerWindow: 1, firstNodes: 1_000 },
        },
      ],
    }),
    'test.json',
  );
  const store = createMemoryEventStore();
  const broker = createInProcessBroker();
  const runner = createProjectionRunner({ store, logger });
  const notifier = createNotifier({ config, store, readModel: runner.readModel, logger });
  const ingest = createIngest({ store, source: broker.ingestSource(), logger });
  await notifier.prepare();
  await runner.start();
  await notifier.begin();
  await ingest.start();
  cleanup.push(async () => {
    await ingest.stop();
    await notifier.stop();
    await runner.stop();
    await receiver.close();
  });

  // The operator's sends (no notification), then each node refuses its declaration: one
  // `node.refused` per report.
  const h = historyInStore(store);
  const nodes = Array.from({ length: n }, (_, i) => `w${String(i).padStart(4, '0')}`);
  const digests = await Promise.all(nodes.map(async (node) => (await h.send(node)).digest));
  const refused = new Set<string>();
  runner.readModel.onChange((c) => {
    if (c.state.status === 'refused') refused.add(c.node);
  });
  const publish = (i: number): void =>
    broker.inject(
      'report',
      encodeReport({ node: nodes[i]!, applied: [], failed: {}, refused: 'bad wave', carried: [], declared: digests[i]! }),
      { messageId: `${nodes[i]}/1`, userId: nodes[i]! },
    );

  publish(0);
  await until('the first delivery held at the receiver', () => receiver.waiting === 1);
  for (let i = 1; i < n; i++) publish(i);
  await until('every report acked', () => ingest.stats().acked === n, 60_000);
  const head = await store.headPosition();
  await until('the fold at the head', () => runner.readModel.position() === head);
  assert.equal(refused.size, n, 'every node folded refused');
  assert.equal(receiver.waiting, 1, 'the first delivery is still held');
  assert.equal(receiver.attempts, 1, 'and nothing else was sent meanwhile');
  assert.equal(receiver.received.length, 0);
  assert.ok(notifier.destinations[0]!.stats().queued >= n - 1, 'the rest waits in the queue');

  receiver.hold = false;
  receiver.release();
  const items = (): { node: string | null; position: string }[] => receiver.received.flatMap((m) => m.json.data.notifications);
  await until('every notification delivered', () => items().length >= n, 80_000);
  assert.deepEqual(
    items().map((x) => x.node),
    nodes,
    'in the order the reports arrived, each once',
  );
  const positions = items().map((x) => BigInt(x.position));
  assert.ok(
    positions.every((p, i) => i === 0 || p > positions[i - 1]!),
    'positions ascend',
  );
  assert.equal(
    receiver.received.reduce((a, m) => a + m.json.data.count, 0),
    n,
  );
  assert.ok(receiver.received.length <= 5, `${receiver.received.length} messages of 10 s each`);
});
