import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from '../../src/app/config.ts';
import { isConvergeError } from '../../src/core/errors.ts';

// --amqp / CONVERGE_AMQP_URL: one URL, or a cluster's nodes separated by commas.

const base = { store: 'memory:' };

test('a comma-separated list of broker URLs is accepted, from the flag and from CONVERGE_AMQP_URL', () => {
  const list = 'amqp://engine:pw@10.0.0.1:5672/prod, amqp://engine:pw@10.0.0.2:5672/prod,amqps://engine:pw@rmq-3.example:5671/prod';
  assert.equal(loadConfig({ flags: { ...base, amqp: list }, env: {} }).amqpUrl, list);
  assert.equal(loadConfig({ flags: base, env: { CONVERGE_AMQP_URL: list } }).amqpUrl, list);
});

test('a list with one bad entry is refused at start, naming that entry with its password hidden', () => {
  assert.throws(
    () => loadConfig({ flags: { ...base, amqp: 'amqp://engine:s3cret@10.0.0.1:5672,http://engine:s3cret@10.0.0.2' }, env: {} }),
    (e: unknown) => {
      assert.ok(isConvergeError(e) && e.code === 'CONVERGE_ERR_CONFIG_INVALID');
      assert.match(e.message, /--amqp \/ CONVERGE_AMQP_URL: .*10\.0\.0\.2.* is not an amqp:\/\/ or amqps:\/\/ URL/);
      assert.doesNotMatch(e.message, /s3cret/);
      return true;
    },
  );
});

test('a list of nothing but commas is refused at start', () => {
  assert.throws(
    () => loadConfig({ flags: { ...base, amqp: ' , ,' }, env: {} }),
    (e: unknown) => isConvergeError(e) && /--amqp .*names no URL/.test(e.message),
  );
});

test('--max-bulk-declarations and --max-bytes-per-token-per-minute are read, with defaults of 1,000 and 256 MiB', () => {
  const d = loadConfig({ flags: {}, env: {} });
  assert.deepEqual([d.maxBulkDeclarations, d.maxBytesPerTokenPerMinute], [1_000, 256 * 1024 * 1024]);
  const c = loadConfig({ flags: { 'max-bulk-declarations': '5000' }, env: { CONVERGE_MAX_BYTES_PER_TOKEN_PER_MINUTE: '1048576' } });
  assert.deepEqual([c.maxBulkDeclarations, c.maxBytesPerTokenPerMinute], [5_000, 1_048_576]);
  assert.throws(() => loadConfig({ flags: { 'max-bulk-declarations': '0' }, env: {} }), /--max-bulk-declarations/);
  assert.throws(() => loadConfig({ flags: { 'max-bytes-per-token-per-minute': '10' }, env: {} }), /--max-bytes-per-token-per-minute/);
});

test('--max-rollout-targets and --max-open-rollouts are read, with defaults of 100,000 and 16', () => {
  const d = loadConfig({ flags: {}, env: {} });
  assert.deepEqual([d.maxRolloutTargets, d.maxOpenRollouts], [100_000, 16]);
  const c = loadConfig({ flags: { 'max-rollout-targets': '500' }, env: { CONVERGE_MAX_OPEN_ROLLOUTS: '3' } });
  assert.deepEqual([c.maxRolloutTargets, c.maxOpenRollouts], [500, 3]);
  assert.throws(() => loadConfig({ flags: { 'max-open-rollouts': '0' }, env: {} }), /--max-open-rollouts/);
});

// docs/operations.md "Retention and archive": a retried append is recognised by its event id only
// while the first copy is hot, so a policy shorter than the retry window is refused.
test('--retain below one hour is refused, naming the floor; one hour and more is read', () => {
  const flags = { ...base, 'archive-dir': '/tmp/a', retain: '59m' };
  assert.throws(
    () => loadConfig({ flags, env: {} }),
    (e: unknown) => isConvergeError(e) && /--retain \/ CONVERGE_RETAIN: .*at least 1h/.test(e.message),
  );
  assert.equal(loadConfig({ flags: { ...flags, retain: '1h' }, env: {} }).retain, 3_600_000);
  assert.equal(loadConfig({ flags: { ...flags, retain: '30d' }, env: {} }).retain, 30 * 86_400_000);
});
