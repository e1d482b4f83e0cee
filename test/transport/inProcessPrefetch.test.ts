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
