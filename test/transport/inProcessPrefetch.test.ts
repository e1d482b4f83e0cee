import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { createInProcessBroker } from '../../src/transport/inProcess.ts';
import type { Delivery } from '../../src/transport/port.ts';

// The in-process broker holds a consumer to a prefetch bound per queue, as RabbitMQ does with
// basic.qos (global=false): a flood reaches ingest a window at a time, not in one turn, so tests
// and the demo see the backpressure serve sees.

const turns = async (n: number): Promise<void> => {
  for (let i = 0; i < n; i++) await nextTurn();
};

test('at most `prefetch` deliveries per queue are out unacked; each ack lets as many more through', async () => {
  const broker = createInProcessBroker({ prefetch: 100 });
  const got: Delivery[] = [];
  const source = broker.ingestSource();
  await source.start((d) => got.push(d));
  for (let i = 0; i < 350; i++) broker.inject('report', Buffer.from(`r${i}`));
  for (let i = 0; i < 30; i++) broker.inject('alive', Buffer.from(`a${i}`));
  await turns(5);
  assert.equal(got.filter((d) => d.kind === 'report').length, 100, 'reports: the window');
  assert.equal(got.filter((d) => d.kind === 'alive').length, 30, 'alive has a window of its own');
  source.ack(got.filter((d) => d.kind === 'report').slice(0, 40));
  await turns(5);
  assert.equal(got.filter((d) => d.kind === 'report').length, 140, 'forty acked, forty more delivered');
  const reports = got.filter((d) => d.kind === 'report');
  assert.deepEqual(
    reports.map((d) => d.body.toString()),
    Array.from({ length: 140 }, (_, i) => `r${i}`),
    'in the order published',
  );
  await source.stop();
});

test('a stopped consumer gives its unacked deliveries back in their order, flagged, ahead of the rest', async () => {
  const broker = createInProcessBroker({ prefetch: 3 });
  const first: Delivery[] = [];
  const one = broker.ingestSource();
  await one.start((d) => first.push(d));
  for (let i = 0; i < 5; i++) broker.inject('report', Buffer.from(`r${i}`));
  await turns(3);
  assert.equal(first.length, 3);
  await one.stop();
  const second: Delivery[] = [];
  const two = broker.ingestSource();
  await two.start((d) => second.push(d));
  await turns(3);
  assert.deepEqual(
    second.map((d) => [d.body.toString(), d.redelivered]),
    [
      ['r0', true],
      ['r1', true],
      ['r2', true],
    ],
  );
  two.ack(second);
  await turns(3);
  assert.deepEqual(
    second.slice(3).map((d) => [d.body.toString(), d.redelivered]),
    [
      ['r3', false],
      ['r4', false],
    ],
  );
  await two.stop();
});

test('a window is delivered a slice of the turn at a time, every delivery once, in order', async () => {
  // A slice of 0 ms: one chunk (16) a turn, so the count does not hang on the machine's speed.
  const broker = createInProcessBroker({ prefetch: 2_000, sliceMs: 0 });
  const got: Delivery[] = [];
  const perTurn: number[] = [];
  const source = broker.ingestSource();
  await source.start((d) => got.push(d));
  for (let i = 0; i < 100; i++) broker.inject('report', Buffer.from(`r${i}`));
  for (let i = 0; i < 10; i++) broker.inject('alive', Buffer.from(`a${i}`));
  for (let turn = 0; turn < 20 && got.length < 110; turn++) {
    const before = got.length;
    await nextTurn();
    perTurn.push(got.length - before);
  }
  assert.equal(got.length, 110);
  assert.ok(
    perTurn.every((n) => n <= 16),
    `deliveries per turn: ${perTurn.join(', ')}`,
  );
  // The queues take turns at the front of a turn: alive does not wait behind the reports' backlog.
  const firstAlive = got.findIndex((d) => d.kind === 'alive');
  assert.ok(firstAlive >= 0 && firstAlive < 32, `the first alive was delivery ${firstAlive}`);
  assert.deepEqual(
    got.filter((d) => d.kind === 'report').map((d) => d.body.toString()),
    Array.from({ length: 100 }, (_, i) => `r${i}`),
  );
  await source.stop();
});
