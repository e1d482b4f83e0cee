import assert from 'node:assert/strict';
import { test } from 'node:test';
import { makeRolloutEvent, rolloutStreamOf } from '../../src/core/events/index.ts';
import { verifySignature, signatureHeader, timestampHeader } from '../../src/notify/index.ts';
import type { EventStore } from '../../src/store/index.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { until } from '../support/until.ts';
import { ids, rig, secret } from './rig.ts';

// Notifications delivered to a real HTTP receiver by an engine's read side on a memory store:
// signed CloudEvents, order kept through an outage, a slow receiver that holds nothing else up,
// and a status flip of many nodes coalesced.

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

test('receiver down, then up: the backlog arrives in order, each notification with one id', async () => {
  const { receiver, h } = await rig();
  receiver.down = true;
  for (let i = 0; i < 6; i++) {
    const { digest } = await h.send(`d${i}`);
    await h.report(`d${i}`, { declared: digest, refused: 'no' });
  }
  await until('attempts while down', () => receiver.attempts >= 3);
  assert.equal(receiver.received.length, 0);
  receiver.down = false;
  await until('the backlog', () => receiver.received.length >= 6);
  assert.deepEqual(
    ids(receiver),
    [0, 1, 2, 3, 4, 5].map((i) => `node.refused:d${i}`),
  );
  const positions = receiver.received.map((m) => BigInt(m.json.data.notifications[0]!.position));
  assert.deepEqual(
    positions,
    [...positions].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)),
  );
});

test('a receiver that does not answer holds up neither the fold nor the appends', async () => {
  const { store, runner, notifier, receiver, h } = await rig({ timeoutMs: 60_000, coalesce: { windowMs: 100 } });
  receiver.hold = true;
  const { digest } = await h.send('s0');
  await h.report('s0', { declared: digest, refused: 'no' });
  await until('the first request held', () => receiver.attempts >= 1);
  for (let i = 1; i <= 50; i++) {
    const sent = await h.send(`s${i}`);
    await h.report(`s${i}`, { declared: sent.digest, refused: 'no' });
  }
  const headAt = await store.headPosition();
  await until('the fold past every append', () => runner.readModel.position() === headAt);
  assert.equal(receiver.received.length, 0, 'still held');
  assert.ok(notifier.destinations[0]!.stats().queued >= 50, 'queued meanwhile');
  receiver.hold = false;
  receiver.release();
  await until('all delivered', () => receiver.received.reduce((a, m) => a + m.json.data.count, 0) >= 51);
});

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
