import { setImmediate as nextTurn } from 'node:timers/promises';
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { foldNode, initialNodeState } from '../../projections/index.ts';
import type { NodeState } from '../../projections/index.ts';
import type { Recorded } from '../../src/core/events/index.ts';
import { createDestination, nodeTriggers, parseNotifyConfig } from '../../src/notify/index.ts';
import type { Notification } from '../../src/notify/index.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { history } from '../support/history.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';
import { createVirtualClock } from '../support/virtualClock.ts';
import { startReceiver } from './receiver.ts';

// A bad wave: 100,000 nodes flip to refused over five minutes. The unit that coalesces is a
// destination (src/notify/destination.ts), so it is fed here directly with what the fold's
// transitions give the trigger (nodeTriggers, as the notifier calls it on each node change),
// on a virtual clock; the messages go to a real receiver. The engine's whole path (store, fold,
// notifier) at 2,000 nodes is in webhook.test.ts.

const cleanup: (() => Promise<void>)[] = [];
after(async () => {
  for (const c of cleanup.reverse()) await c();
});

/** One node's change from behind to refused, the fold's own, renamed for node `i` at position `i + 1`. */
function flips(): (i: number) => Notification[] {
  const h = history('template');
  const sent = h.send();
  const behind = foldNode(initialNodeState('template'), sent);
  const report = h.report({ declared: sent.data.digest, refused: 'bad wave' });
  const refused = foldNode(behind, report);
  return (i) => {
    const node = `bad-${String(i).padStart(6, '0')}`;
    const previous: NodeState = { ...behind, node };
    const state: NodeState = { ...refused, node };
    const event = { ...report, id: `${report.id.slice(0, 24)}${String(i).padStart(12, '0')}`, position: BigInt(i + 1) } as Recorded;
    return nodeTriggers(previous, state, event);
  };
}

test('a flip of 100,000 nodes over five minutes is maxPerWindow messages, then a summary per window (and per spill of a full queue)', async () => {
  const n = 100_000;
  const batches = 100;
  const everyMs = 3_000;
  const receiver = await startReceiver();
  const clock = createVirtualClock();
  // The documented defaults: windowMs 60 s, maxPerWindow 10, firstNodes 20, queueLimit 10,000.
  const config = parseNotifyConfig(JSON.stringify({ destinations: [{ name: 'hook', kind: 'webhook', url: receiver.url }] }), 't.json')
    .destinations[0]!;
  const { windowMs, maxPerWindow, firstNodes } = config.coalesce;
  const d = createDestination({ config, store: createMemoryEventStore(), logger, clock });
  await d.load(0n);
  d.start();
  cleanup.push(async () => {
    await d.stop();
    await receiver.close();
  });

  const flip = flips();
  const ids = new Set<string>();
  let offered = 0;
  const asleep = (): boolean => clock.pending() > 0 && receiver.waiting === 0;
  /** Past the microtasks an offer starts (an idle loop woken clears its timer), then until the loop sleeps. */
  const sleeping = async (): Promise<number> => {
    await nextTurn();
    await until('the loop asleep', asleep);
    return clock.nextAt() ?? sleeping();
  };
  for (let b = 0; b < batches; b++) {
    if (b > 0) {
      // Time moves only while the loop sleeps, by whole sleeps, up to the next batch.
      while (clock.now() < b * everyMs) clock.advanceTo(Math.min(await sleeping(), b * everyMs));
    }
    for (let k = 0; k < n / batches; k++) {
      for (const note of flip(offered++)) {
        ids.add(note.id);
        d.offer(note);
      }
    }
  }
  assert.equal(ids.size, n, 'one refusal per node, each with its own id');
  const total = (): number => receiver.received.reduce((a, m) => a + m.json.data.count, 0);
  while (total() < n) {
    await until('the loop asleep or done', () => total() >= n || asleep());
    if (total() < n) clock.advanceTo(await sleeping());
  }

  const spanMs = (batches - 1) * everyMs;
  const windows = Math.ceil(spanMs / windowMs) + 1;
  const singles = receiver.received.filter((m) => m.json.data.count === 1);
  const summaries = receiver.received.filter((m) => m.json.data.count > 1);
  assert.equal(total(), n, 'every node counted once');
  assert.equal(singles.length, maxPerWindow, 'maxPerWindow messages of one notification, then none');
  assert.ok(
    summaries.length <= 2 * windows,
    `${summaries.length} summaries over ${spanMs / 1000} s: at most one per window and one per spill, ${2 * windows}`,
  );
  assert.ok(receiver.received.length <= maxPerWindow + 2 * windows, `${receiver.received.length} messages`);
  for (const s of summaries) assert.ok(s.json.data.notifications.length <= firstNodes, 'a summary names its first nodes only');
  const froms = receiver.received.map((m) => BigInt(m.json.data.notifications[0]!.position));
  assert.ok(
    froms.every((p, i) => i === 0 || p > froms[i - 1]!),
    'messages in position order',
  );
  assert.equal(d.stats().queued, 0);
});

test('notifications that spill while the spill summary is in flight are kept, not deleted with it', async () => {
  const receiver = await startReceiver();
  receiver.hold = true;
  const clock = createVirtualClock();
  const config = parseNotifyConfig(
    JSON.stringify({ destinations: [{ name: 'hook', kind: 'webhook', url: receiver.url, queueLimit: 1 }] }),
    't.json',
  ).destinations[0]!;
  const d = createDestination({ config, store: createMemoryEventStore(), logger, clock });
  await d.load(0n);
  d.start();
  cleanup.push(async () => {
    await d.stop();
    await receiver.close();
  });
  const flip = flips();
  const offer = (i: number): void => {
    for (const note of flip(i)) d.offer(note);
  };
  offer(0); // queued
  offer(1); // the queue is full: spilled
  await until('the first message held', () => receiver.waiting === 1);
  receiver.release();
  await until('the spill summary held', () => receiver.waiting === 1 && receiver.attempts === 2);
  offer(2); // spills again while the spill's summary is in flight
  receiver.hold = false;
  receiver.release();
  const total = (): number => receiver.received.reduce((a, m) => a + m.json.data.count, 0);
  await until('the loop idle', async () => {
    await nextTurn();
    return receiver.waiting === 0 && clock.pending() > 0 && d.stats().queued === 0;
  });
  assert.equal(total(), 3, 'every notification delivered');
});
