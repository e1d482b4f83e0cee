import assert from 'node:assert/strict';
import { test } from 'node:test';
import { nodePermissions } from '../../src/brokerAdmin/index.ts';
import { inboundKinds, names, nodeQueueOf, queueOfKind } from '../../src/transport/brokerNames.ts';
import { meshTopology, nodeTopology } from '../../src/transport/topology.ts';

// docs/design.md §1 is a contract with the Go nodes: these literals are restated here on purpose, so a
// change to the one home of the names fails a test instead of silently moving every user.

test('the broker names are the ones docs/design.md §1 and wire.go fix', () => {
  assert.deepEqual(
    { ...names },
    {
      meshExchange: 'mesh',
      declarationsExchange: 'mesh.declarations',
      deadExchange: 'mesh.dead',
      deadQueue: 'mesh.dead',
      reportsQueue: 'mesh.reports',
      aliveQueue: 'mesh.alive',
      reportKey: 'report',
      aliveKey: 'alive',
    },
  );
  assert.deepEqual([...inboundKinds], ['report', 'alive']);
  assert.deepEqual({ ...queueOfKind }, { report: 'mesh.reports', alive: 'mesh.alive' });
  assert.equal(nodeQueueOf('n-1'), 'node.n-1');
});

test('the topology the engine asserts and the rights a node account gets use the same names', () => {
  const t = meshTopology();
  assert.deepEqual(t.exchanges.map((x) => [x.name, x.type]).sort(), [
    ['mesh', 'topic'],
    ['mesh.dead', 'fanout'],
    ['mesh.declarations', 'direct'],
  ]);
  assert.deepEqual(t.bindings.map((b) => `${b.exchange} -${b.routingKey}-> ${b.queue}`).sort(), [
    'mesh -alive-> mesh.alive',
    'mesh -report-> mesh.reports',
    'mesh.dead --> mesh.dead',
  ]);
  assert.deepEqual(nodeTopology('n1').bindings, [{ queue: 'node.n1', exchange: 'mesh.declarations', routingKey: 'n1' }]);
  const p = nodePermissions('n1');
  assert.equal(p.topic.exchange, names.meshExchange);
  assert.equal(p.vhost.read, '^node\\.n1$');
  assert.equal(p.topic.write, '^(report|alive)$');
});
