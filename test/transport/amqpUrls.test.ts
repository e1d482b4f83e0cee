import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import pino from 'pino';
import { isConvergeError } from '../../src/core/errors.ts';
import { connectAmqp } from '../../src/transport/amqpConnection.ts';
import { amqpUrlListProblems, redactUrl, splitAmqpUrls } from '../../src/transport/amqpUrls.ts';

// `--amqp` as a list of a cluster's nodes, without a broker.

test('a list splits on commas, trims, and drops empty entries', () => {
  assert.deepEqual(splitAmqpUrls(' amqp://a:1/v , amqp://b:2/v,,amqps://c/v '), ['amqp://a:1/v', 'amqp://b:2/v', 'amqps://c/v']);
  assert.deepEqual(splitAmqpUrls(['amqp://a', ' ']), ['amqp://a']);
});

test('every entry of a list is checked, and an empty list is a problem', () => {
  assert.deepEqual(amqpUrlListProblems('amqp://a,amqps://b:5671/x'), []);
  assert.equal(amqpUrlListProblems('amqp://a,http://b').length, 1);
  assert.equal(amqpUrlListProblems('amqp://a,not a url').length, 1);
  assert.deepEqual(amqpUrlListProblems(','), ['names no URL']);
});

test('a password never appears in what is logged, even in a URL that does not parse', () => {
  assert.equal(redactUrl('amqp://engine:s3cret@10.0.0.1:5672/prod'), 'amqp://engine:***@10.0.0.1:5672/prod');
  assert.doesNotMatch(redactUrl('amqp://engine:s3cret@[bad'), /s3cret/);
});

/** A port that refuses connections: bound, then closed. */
async function deadPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

test('a start where no node of the list answers fails with BROKER_UNAVAILABLE naming every node tried, passwords hidden', async () => {
  const [a, b] = [await deadPort(), await deadPort()];
  await assert.rejects(
    connectAmqp({ url: `amqp://engine:s3cret@127.0.0.1:${a}/,amqp://engine:s3cret@127.0.0.1:${b}/`, logger: pino({ level: 'silent' }) }),
    (e: unknown) => {
      assert.ok(isConvergeError(e, 'CONVERGE_ERR_BROKER_UNAVAILABLE'), String(e));
      assert.match(e.message, new RegExp(`127\\.0\\.0\\.1:${a}.*127\\.0\\.0\\.1:${b}`));
      assert.doesNotMatch(e.message, /s3cret/);
      return true;
    },
  );
});

test('a node that accepts TCP but never answers the AMQP handshake counts as failed after the connect timeout', async () => {
  const silent = createServer(() => undefined);
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  const { port } = silent.address() as AddressInfo;
  try {
    await assert.rejects(
      connectAmqp({ url: `amqp://127.0.0.1:${port}/`, logger: pino({ level: 'silent' }), connectTimeoutMs: 300 }),
      (e: unknown) => isConvergeError(e, 'CONVERGE_ERR_BROKER_UNAVAILABLE') && /ETIMEDOUT/.test(e.message),
    );
  } finally {
    silent.close();
  }
});
