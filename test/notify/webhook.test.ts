import assert from 'node:assert/strict';
import { test } from 'node:test';
import { makeRolloutEvent, rolloutStreamOf } from '../../src/core/events/index.ts';
import { verifySignature, signatureHeader, timestampHeader } from '../../src/notify/index.ts';
import type { Fetch } from '../../src/notify/index.ts';
import type { EventStore } from '../../src/store/index.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { until } from '../support/until.ts';
import { createVirtualClock } from '../support/virtualClock.ts';
import { ids, rig, secret } from './rig.ts';
import type { Received } from './receiver.ts';

// Notifications delivered to a real HTTP receiver by an engine's read side on a memory store:
// signed CloudEvents, order kept through an outage, a status flip of many nodes coalesced, and the
// cursor's pace. A slow receiver: slowReceiver.test.ts.

test('a refused node and a halted rollout arrive as signed CloudEvents; the wrong secret does not verify', async () => {
  const { store, receiver, h } = await rig();
  const { digest } = await h.send('n1');
  await h.report('n1', { declared: digest, refused: 'signature does not verify' });
  await store.append([
    {
      stream: rolloutStreamOf('r1'),
      expected: 'any',
      events: [
        makeRolloutEvent(
          'RolloutHalted',
          { rollout: 'r1', wave: 3, at: h.now().toISOString(), failures: 4, maxFailures: 2, failed: [] },
          { revision: 5n },
        ),
      ],
    },
  ]);
  await until('two notifications', () => receiver.received.length >= 2);
  assert.deepEqual(ids(receiver), ['node.refused:n1', 'rollout.halted:']);
  const nowS = Math.floor(Date.now() / 1000);
  for (const m of receiver.received) {
    assert.equal(m.headers['content-type'], 'application/cloudevents+json');
    const e = JSON.parse(m.body) as Record<string, unknown>;
    for (const k of ['id', 'source', 'type', 'time', 'specversion']) assert.ok(typeof e[k] === 'string', `${k} present`);
    assert.equal(e['specversion'], '1.0');
    const headers = { signature: m.headers[signatureHeader] as string, timestamp: m.headers[timestampHeader] as string };
    assert.ok(verifySignature(secret, headers, m.body, nowS), 'signature verifies with the shared secret');
    assert.ok(!verifySignature('another secret', headers, m.body, nowS), 'a wrong secret is detected');
    assert.ok(!verifySignature(secret, headers, `${m.body} `, nowS), 'a changed body is detected');
    assert.ok(!verifySignature(secret, headers, m.body, nowS + 3600), 'an old timestamp (a replay) is refused');
  }
  assert.equal((JSON.parse(receiver.received[1]!.body) as { type: string }).type, 'io.converge.rollout.halted');
});

test('receiver down for 60 s, then up: the backlog arrives in order, one id each, on the documented backoff', async () => {
  // 60 s of downtime on a virtual clock (the destination's `clock`): the backoff and the windows
  // wait on it, the HTTP requests are real. Retry and coalescing are the documented defaults;
  // firstNodes is raised so a summary names every notification it counts.
  const clock = createVirtualClock();
  const tried: { at: number; id: string }[] = [];
  const recording: Fetch = (input, init) => {
    tried.push({ at: clock.now(), id: (JSON.parse(init!.body as string) as { id: string }).id });
    return fetch(input, init);
  };
  const downMs = 60_000;
  const everyMs = 5_000;
  const perBatch = 4;
  const { store, runner, receiver, h } = await rig(
    { retry: { minMs: 500, maxMs: 60_000 }, coalesce: { firstNodes: 1_000 } },
    createMemoryEventStore(),
    { clock, fetch: recording },
  );
  receiver.down = true;
  const nodes: string[] = [];
  /** Four more refusals, appended and folded at the virtual time it is now. */
  async function batch(): Promise<void> {
    for (let k = 0; k < perBatch; k++) {
      const node = `d${String(nodes.length).padStart(3, '0')}`;
      nodes.push(node);
      const { digest } = await h.send(node);
      await h.report(node, { declared: digest, refused: 'receiver down' });
    }
    const head = await store.headPosition();
    await until('the batch folded', () => runner.readModel.position() === head);
  }
  await batch();
  await until('the first attempt', () => tried.length >= 1 && receiver.waiting === 0);
  // Time moves only while the loop sleeps (a backoff), so no attempt is in flight as it moves.
  while (clock.now() < downMs) {
    await until('the loop asleep', () => clock.pending() > 0 && receiver.waiting === 0);
    const due = nodes.length / perBatch;
    clock.advanceTo(Math.min(clock.nextAt()!, due * everyMs, downMs));
    if (clock.now() === due * everyMs && clock.now() < downMs) await batch();
  }
  assert.equal(receiver.received.length, 0, 'nothing accepted while down');
  receiver.down = false;
  const items = (): Received['json']['data']['notifications'] => receiver.received.flatMap((m) => m.json.data.notifications);
  while (items().length < nodes.length) {
    await until('the loop asleep or done', () => items().length >= nodes.length || (clock.pending() > 0 && receiver.waiting === 0));
    if (items().length < nodes.length) clock.advanceTo(clock.nextAt()!);
  }

  // Every notification, once, in order, after the receiver came back.
  assert.equal(nodes.length, (downMs / everyMs) * perBatch);
  assert.deepEqual(
    items().map((n) => n.node),
    nodes,
  );
  const ids = items().map((n) => n.id);
  assert.equal(new Set(ids).size, nodes.length, 'one id per notification');
  const positions = items().map((n) => BigInt(n.position));
  assert.ok(
    positions.every((p, i) => i === 0 || p > positions[i - 1]!),
    'positions ascend',
  );
  // While down, every attempt was the head of the queue again: the same id each time.
  const down = tried.filter((t) => t.at < downMs);
  assert.deepEqual(new Set(down.map((t) => t.id)), new Set([ids[0]]), 'a retry carries the same id');
  assert.equal(tried[down.length]!.id, ids[0], 'the first attempt after the outage delivers the head');
  // The backoff: minMs doubling to maxMs, each delay within the ±20% jitter, so 60 s hold
  // 7 or 8 attempts (delays of 0.8× add up past 60 s after the 8th, of 1.2× after the 7th).
  const [minAttempts, maxAttempts] = attemptsWithin(downMs, 500, 60_000, 0.2);
  assert.deepEqual([minAttempts, maxAttempts], [7, 8]);
  assert.ok(down.length >= minAttempts && down.length <= maxAttempts, `${down.length} attempts in 60 s`);
  for (let i = 1; i <= down.length; i++) {
    const base = Math.min(60_000, 500 * 2 ** (i - 1));
    const gap = tried[i]!.at - tried[i - 1]!.at;
    assert.ok(gap >= Math.round(base * 0.8) && gap <= Math.min(60_000, Math.round(base * 1.2)), `delay ${i}: ${gap} ms, base ${base}`);
  }
});

/** The fewest and most attempts a backoff (minMs doubling to maxMs, ±jitter) makes in its first `ms`. */
function attemptsWithin(ms: number, minMs: number, maxMs: number, jitter: number): [number, number] {
  const count = (factor: number): number => {
    let at = 0;
    let n = 1;
    for (let base = minMs; ; base = Math.min(maxMs, base * 2)) {
      at += Math.min(maxMs, Math.round(base * factor));
      if (at >= ms) return n;
      n++;
    }
  };
  return [count(1 + jitter), count(1 - jitter)];
}

test('a status flip of 2,000 nodes arrives as a bounded number of messages counting them all', async () => {
  const { store, receiver, h } = await rig({ coalesce: { windowMs: 200, maxPerWindow: 3, firstNodes: 5 } });
  const n = 2000;
  const writes = [];
  for (let i = 0; i < n; i++) writes.push(h.send(`f${i}`));
  const sent = await Promise.all(writes);
  await Promise.all(sent.map((s, i) => h.report(`f${i}`, { declared: s.digest, refused: 'bad wave' })));
  assert.ok(store);
  await until('every refusal counted', () => receiver.received.reduce((a, m) => a + m.json.data.count, 0) >= n);
  const total = receiver.received.reduce((a, m) => a + m.json.data.count, 0);
  assert.equal(total, n, 'counted once each');
  assert.ok(receiver.received.length <= 60, `bounded: ${receiver.received.length} messages`);
  const summaries = receiver.received.filter((m) => m.json.data.count > 1);
  assert.ok(summaries.length >= 1);
  for (const s of summaries) assert.ok(s.json.data.notifications.length <= 5, 'first K nodes only');
});

test('a busy destination writes its cursor at most about once a second, not once per delivery', async () => {
  const store = createMemoryEventStore();
  let writes = 0;
  const setCheckpoint = store.setCheckpoint.bind(store);
  // Counted on the store the notifier is given: each write is a commit (an fsync on SQLite).
  const counting: EventStore = Object.assign(Object.create(store) as EventStore, {
    setCheckpoint: async (name: string, position: bigint) => {
      if (name.startsWith('notify:')) writes++;
      return setCheckpoint(name, position);
    },
  });
  const { receiver, h } = await rig({ coalesce: { windowMs: 1000, maxPerWindow: 10_000 } }, counting);
  const before = writes;
  for (let i = 0; i < 200; i++) {
    const { digest } = await h.send(`c${i}`);
    await h.report(`c${i}`, { declared: digest, refused: 'no' });
  }
  await until('every notification', () => receiver.received.length >= 200);
  assert.ok(writes - before < 50, `${writes - before} cursor writes for 200 deliveries`);
});
