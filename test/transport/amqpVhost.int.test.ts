import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { connectAmqp } from '../../src/transport/amqpConnection.ts';
import { logger } from '../support/logger.ts';

// A broker URL naming a vhost the broker does not have: RabbitMQ answers the handshake's
// connection.open with a connection.close (530 NOT_ALLOWED), which amqplib reports as
// "Expected ConnectionOpenOk; got <ConnectionClose channel:0>". The operator is told the vhost.

test('connecting to a vhost that does not exist names the vhost', { timeout: 30_000 }, async () => {
  const vhost = `converge-missing-${randomBytes(6).toString('hex')}`;
  await assert.rejects(connectAmqp({ url: `amqp://guest:guest@127.0.0.1:5672/${vhost}`, logger }), (e: Error & { code?: string }) => {
    assert.equal(e.code, 'CONVERGE_ERR_BROKER_UNAVAILABLE');
    assert.match(e.message, new RegExp(`vhost ${vhost} does not exist`));
    assert.doesNotMatch(e.message, /ConnectionOpenOk/);
    return true;
  });
});

test('a vhost with a slash, percent-encoded in the URL, is named decoded', { timeout: 30_000 }, async () => {
  const vhost = `converge/missing-${randomBytes(6).toString('hex')}`;
  await assert.rejects(connectAmqp({ url: `amqp://guest:guest@127.0.0.1:5672/${encodeURIComponent(vhost)}`, logger }), (e: Error) => {
    assert.match(e.message, new RegExp(`vhost ${vhost} does not exist`));
    return true;
  });
});
