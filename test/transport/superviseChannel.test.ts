import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Channel } from 'amqplib';
import { superviseChannel } from '../../src/transport/superviseChannel.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';

// A supervised channel's stop while its connection is down (open() waits for the connection to
// come back): the stop must end, not wait for a broker that may never return.

test('stop() ends while open() is still waiting for the connection, and current() is refused', async () => {
  let opens = 0;
  const sup = superviseChannel<Channel>({
    open: () => {
      opens++;
      return new Promise<Channel>(() => {}); // the connection never comes back
    },
    setup: async () => {},
    logger,
    name: 'test',
  });
  await until('the first open', () => opens === 1);
  const refused = assert.rejects(sup.current(), /test channel stopped/);
  let stopped = false;
  void sup.stop().then(() => (stopped = true));
  await until('stop() to end while open() waits', () => stopped);
  await refused;
  await assert.rejects(sup.current(), /test channel stopped/);
});

test('a channel that opens after stop() is closed, not kept', async () => {
  let resolveOpen: (c: Channel) => void = () => {};
  let closed = 0;
  const sup = superviseChannel<Channel>({
    open: () => new Promise<Channel>((r) => (resolveOpen = r)),
    setup: async () => {},
    logger,
    name: 'late',
  });
  await sup.stop();
  const fake = { on: () => fake, once: () => fake, close: async () => void closed++ } as unknown as Channel;
  resolveOpen(fake);
  await until('the late channel closed', () => closed === 1);
});
