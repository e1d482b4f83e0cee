import assert from 'node:assert/strict';
import { test } from 'node:test';
import { vhostOfAmqpUrl } from '../../src/brokerAdmin/deadLetterPolicy.ts';

// The vhost serve bounds mesh.dead in and fences the relay on: `--amqp` may list a cluster's nodes.

test('the vhost of one URL, and of a list of URLs separated by commas (the first names it)', () => {
  assert.equal(vhostOfAmqpUrl('amqp://u:p@127.0.0.1:5672'), '/');
  assert.equal(vhostOfAmqpUrl('amqp://u:p@127.0.0.1:5672/fleet%2Fa'), 'fleet/a');
  assert.equal(vhostOfAmqpUrl('amqp://u:p@10.0.0.1:5672/prod, amqp://u:p@10.0.0.2:5672/prod'), 'prod');
});
