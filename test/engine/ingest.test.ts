import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createIngest } from '../../src/engine/ingest.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import type { Delivery, IngestSource } from '../../src/transport/port.ts';
import { logger } from '../support/logger.ts';

// Ingest against a hand-made IngestSource, for the corners a broker cannot be made to hit on cue.

test('stop returns while a dead-letter publish waits for a channel that only the source stop ends', async () => {
  // The AMQP source's deadLetter waits for its dead-letter channel (dead.current()) while the
  // broker is away, and only source.stop() rejects that wait. ingest.stop must not wait for the
  // dead-letter forever before stopping the source: SIGTERM during a broker outage hung serve.
  let onDelivery: ((d: Delivery) => void) | null = null;
  let stopped = false;
  const waiting: Array<(e: Error) => void> = [];
  const acked: Delivery[] = [];
  const source: IngestSource = {
    start: async (f) => {
      onDelivery = f;
    },
    ack: (ds) => {
      if (!stopped) acked.push(...ds);
    },
    isLive: () => !stopped,
    deadLetter: () => new Promise<void>((_resolve, reject) => waiting.push(reject)),
    pause: async () => {},
    stop: async () => {
      stopped = true;
      for (const reject of waiting.splice(0)) reject(new Error('dead-letter channel stopped'));
    },
  };
  const ingest = createIngest({
    store: createMemoryEventStore(),
    source,
    logger,
    flushMs: 1,
    retry: { minMs: 5, maxMs: 20 },
  });
  await ingest.start();
  onDelivery!({
    kind: 'report',
    body: Buffer.from('not json'),
    messageId: 'm1',
    userId: 'n1',
    redelivered: false,
    routingKey: 'report',
    handle: 1,
  });
  assert.equal(waiting.length, 1, 'the refused delivery is being dead-lettered');

  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    ingest.stop().then(() => 'stopped'),
    new Promise<string>((r) => (timer = setTimeout(() => r('still waiting'), 8_000))),
  ]);
  clearTimeout(timer);
  assert.equal(outcome, 'stopped');
  assert.equal(stopped, true);
  assert.deepEqual(acked, [], 'a delivery whose dead-letter copy was never confirmed is not acked');
});
