import { setImmediate as nextTurn } from 'node:timers/promises';
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { connectAmqp } from '../../src/transport/amqpConnection.ts';
import { superviseChannel } from '../../src/transport/superviseChannel.ts';
import { createBrokerLab, describeOnBroker } from '../support/broker.ts';
import { logger } from '../support/logger.ts';
import type { BrokerLab } from '../support/broker.ts';

// `converge demo --amqp` runs 50 simulated nodes on one connection, each with a supervised
// channel that stops when the connection closes: many listeners on one signal is the design,
// not a leak, and must not print Node's MaxListenersExceededWarning to the operator.

describeOnBroker('many supervised channels on one connection', () => {
  let lab: BrokerLab;
  before(async () => {
    lab = await createBrokerLab('manych');
  });
  after(async () => {
    await lab.remove();
  });

  test('fifty channels watching one connection raise no MaxListenersExceededWarning', async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error): void => void warnings.push(w);
    process.on('warning', onWarning);
    const conn = await connectAmqp({ url: lab.engineUrl, logger });
    try {
      const channels = Array.from({ length: 50 }, (_, i) =>
        superviseChannel({ open: () => conn.createChannel(), setup: async () => {}, logger, name: `ch-${i}`, until: conn.closed }),
      );
      await Promise.all(channels.map((c) => c.current()));
      await nextTurn();
      await Promise.all(channels.map((c) => c.stop()));
    } finally {
      await conn.close();
      process.off('warning', onWarning);
    }
    assert.deepEqual(
      warnings.filter((w) => w.name === 'MaxListenersExceededWarning').map((w) => w.message),
      [],
    );
  });
});
