import assert from 'node:assert/strict';
import { test } from 'node:test';
import { escapeRegex, nodeIdPattern, nodePermissions, validateNodeId } from '../../src/brokerAdmin/index.ts';
import { isConvergeError } from '../../src/core/errors.ts';

// The broker evaluates these patterns with Erlang's `re` (PCRE); for anchored literals and
// alternation JS RegExp agrees, so the intent can be checked here without a broker.
const matches = (pattern: string, name: string) => new RegExp(pattern).test(name);

test('node ids: lowercase letters, digits, dot, underscore, hyphen; 1 to 63 characters; no leading punctuation', () => {
  for (const ok of ['a', 'node-1', 'web.eu-west.3', 'x_y', 'a'.repeat(63)]) assert.equal(validateNodeId(ok), ok);
  for (const bad of ['', 'A', 'node/1', 'node 1', '-a', '.a', 'a*', 'a#', 'a'.repeat(64), 'né', 'a\n', 'a\u0000']) {
    assert.throws(
      () => validateNodeId(bad),
      (e) => isConvergeError(e, 'CONVERGE_ERR_NODE_ID_INVALID'),
      JSON.stringify(bad),
    );
  }
  assert.throws(
    () => validateNodeId(42),
    (e) => isConvergeError(e, 'CONVERGE_ERR_NODE_ID_INVALID'),
  );
  assert.equal(nodeIdPattern.source, '^[a-z0-9][a-z0-9._-]{0,62}$');
});

test('write admits only the mesh exchange: not the default exchange, not mesh.declarations or mesh.dead', () => {
  const { vhost } = nodePermissions('n1');
  assert.ok(matches(vhost.write, 'mesh'));
  // The default exchange is named "" and checked by RabbitMQ as amq.default.
  for (const other of ['', 'amq.default', 'mesh.declarations', 'mesh.dead', 'meshx', 'xmesh', 'amq.topic']) {
    assert.equal(matches(vhost.write, other), false, other);
  }
});

test("read admits only the node's own queue; the dot in the id is literal, so n.1 cannot read nx1's queue", () => {
  const { vhost } = nodePermissions('n.1');
  assert.ok(matches(vhost.read, 'node.n.1'));
  for (const other of ['node.nx1', 'node.n.10', 'node.n', 'mesh.reports', 'mesh.alive', 'nodexn.1', 'node.n.1.x']) {
    assert.equal(matches(vhost.read, other), false, other);
  }
});

test('configure admits no real resource name, and topic permissions allow exactly the report and alive keys', () => {
  const { vhost, topic } = nodePermissions('n1');
  for (const name of ['node.n1', 'mesh', 'amq.gen-abc', 'x']) assert.equal(matches(vhost.configure, name), false, name);
  assert.equal(topic.exchange, 'mesh');
  assert.ok(matches(topic.write, 'report') && matches(topic.write, 'alive'));
  for (const key of ['', 'report.x', 'xreport', 'alive2', 'declarations', '#', '*']) assert.equal(matches(topic.write, key), false, key);
  for (const key of ['report', 'alive', '#']) assert.equal(matches(topic.read, key), false, key);
});

test('escapeRegex makes every regex metacharacter literal', () => {
  const s = 'a.b*c+d?e(f)g[h]i{j}k|l^m$n\\o-p';
  assert.ok(new RegExp(`^${escapeRegex(s)}$`).test(s));
  assert.equal(new RegExp(`^${escapeRegex('a.b')}$`).test('axb'), false);
});
