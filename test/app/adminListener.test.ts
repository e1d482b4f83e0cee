import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from '../../src/app/config.ts';
import { openFilesLimit } from '../../src/app/fdLimit.ts';
import { isConvergeError } from '../../src/core/errors.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { holdGet } from '../support/openStreams.ts';
import { serveInProcess } from '../support/serveInProcess.ts';

// As `serve` is configured: the caps, the listener's limits and the admin
// listener come from flags (or CONVERGE_* variables), are checked at start, and reach the API.

test('serve settings: the caps, the listener limits and --admin-listen are read and checked', () => {
  const c = loadConfig({
    flags: {
      'max-streams': '40',
      'max-streams-per-client': '4',
      'max-awaits': '30',
      'max-awaits-per-client': '3',
      'max-connections': '200',
      'stream-max-ms': '60000',
      'idle-timeout-ms': '2000',
      'request-timeout-ms': '5000',
      'admin-listen': '127.0.0.1:9464',
    },
    env: {},
  });
  assert.deepEqual(
    [
      c.maxStreams,
      c.maxStreamsPerClient,
      c.maxAwaits,
      c.maxAwaitsPerClient,
      c.maxConnections,
      c.streamMaxMs,
      c.idleTimeoutMs,
      c.requestTimeoutMs,
    ],
    [40, 4, 30, 3, 200, 60_000, 2_000, 5_000],
  );
  assert.deepEqual(c.adminListen, { host: '127.0.0.1', port: 9464 });
  assert.deepEqual(loadConfig({ flags: {}, env: { CONVERGE_ADMIN_LISTEN: '[::1]:0' } }).adminListen, { host: '::1', port: 0 });
  assert.equal(loadConfig({ flags: {}, env: {} }).adminListen, null);

  const wrong = (flags: Record<string, string>): string => {
    try {
      loadConfig({ flags, env: {} });
    } catch (e) {
      assert.ok(isConvergeError(e, 'CONVERGE_ERR_CONFIG_INVALID'));
      return e.message;
    }
    return 'accepted';
  };
  assert.match(wrong({ 'admin-listen': 'localhost' }), /--admin-listen \/ CONVERGE_ADMIN_LISTEN: must be <host>:<port>/);
  assert.match(wrong({ 'max-streams-per-client': '0' }), /--max-streams-per-client .*at least 1/);
  // The caps must leave sockets over for short requests and the probes.
  assert.match(
    wrong({ 'max-streams': '100', 'max-awaits': '100', 'max-connections': '200' }),
    /--max-connections .*more than --max-streams \+ --max-awaits/,
  );
  assert.match(wrong({ 'max-streams': '10', 'max-streams-per-client': '11' }), /--max-streams-per-client .*at most --max-streams/);
});

test('serve with --admin-listen answers the probes there, and applies the caps on the main listener', async (t) => {
  const { engine, url: base } = await serveInProcess(t, createMemoryEventStore(), {
    settings: { adminListen: '127.0.0.1:0', maxStreamsPerClient: '1', apiTokens: 'admin-test-reader:read' },
  });
  const admin = engine.adminUrl();
  assert.ok(admin !== null && admin !== base, `an admin listener of its own: ${admin}`);
  const headers = { authorization: 'Bearer admin-test-reader' };
  const first = await holdGet(base, '/v1/events', { headers });
  assert.equal(first.status, 200);
  const second = await holdGet(base, '/v1/events', { headers });
  assert.equal(second.status, 429);
  assert.equal((await fetch(`${admin}/healthz`)).status, 200);
  assert.equal((await fetch(`${admin}/readyz`)).status, 200);
  const metrics = await (await fetch(`${admin}/metrics`)).text();
  assert.match(metrics, /^converge_http_open\{kind="stream"\} 1$/m);
  assert.equal((await fetch(`${admin}/v1/nodes`, { headers })).status, 404, 'the admin listener serves only the probes');
  first.close();
});

test('the open-files limit is read from /proc/self/limits, for the warning at start', () => {
  const limits = (soft: string) =>
    `Limit                     Soft Limit           Hard Limit           Units     \nMax open files            ${soft}                20000                files     \n`;
  assert.equal(
    openFilesLimit(() => limits('1024')),
    1024,
  );
  assert.equal(
    openFilesLimit(() => limits('unlimited')),
    Number.POSITIVE_INFINITY,
  );
  assert.equal(
    openFilesLimit(() => {
      throw new Error('no /proc here');
    }),
    null,
  );
});

// --request-timeout-ms is accepted up to an hour; node refuses a headers timeout longer than the
// request timeout, so the two must reach its server together, whatever the value.
test("serve starts with --request-timeout-ms past the 300 s default of node's server", async (t) => {
  const { engine, url: base } = await serveInProcess(t, createMemoryEventStore(), {
    settings: { adminListen: '127.0.0.1:0', requestTimeoutMs: '600000' },
  });
  assert.equal((await fetch(`${base}/healthz`)).status, 200);
  assert.equal(engine.app.server.requestTimeout, 600_000);
  assert.equal(engine.app.server.headersTimeout, 600_000);
});
