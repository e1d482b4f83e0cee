import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import pino from 'pino';
import { apiHarness, readToken, sendToken, write } from '../support/apiHarness.ts';

// Every request, /healthz probes included, was logged at info with every header.
// Probes are logged at debug; other requests at info with method, URL and status, no headers.

type Line = Record<string, unknown> & { level: number; msg: string };

async function logged(
  level: string,
  run: (h: Awaited<ReturnType<typeof apiHarness>>) => Promise<void>,
): Promise<{ lines: Line[]; text: string }> {
  const chunks: string[] = [];
  const sink = new Writable({ write: (chunk, _enc, cb) => (chunks.push(String(chunk)), cb()) });
  const h = await apiHarness({ logger: pino({ level }, sink) });
  try {
    await run(h);
  } finally {
    await h.close();
  }
  const text = chunks.join('');
  const lines = text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Line);
  return { lines, text };
}

test('probes (/healthz, /readyz, /metrics) are not logged at info', async () => {
  const { lines } = await logged('info', async (h) => {
    for (const url of ['/healthz', '/readyz', '/metrics']) assert.equal((await h.app.inject({ url })).statusCode, 200);
  });
  assert.deepEqual(
    lines.map((l) => l.msg),
    [],
  );
});

test('probes are logged at debug', async () => {
  const { lines } = await logged('debug', async (h) => {
    await h.app.inject({ url: '/healthz' });
  });
  const probe = lines.filter((l) => (l.req as { url?: string } | undefined)?.url === '/healthz');
  assert.ok(probe.length > 0, 'the probe is in the debug log');
  assert.ok(
    probe.every((l) => l.level === 20),
    'at debug level',
  );
});

test('other requests are logged at info with method, URL and status but no headers and never the token', async () => {
  const { lines, text } = await logged('info', async (h) => {
    const r = await h.app.inject({
      method: 'POST',
      url: '/v1/nodes/l1/declarations',
      headers: { ...write, 'user-agent': 'secret-agent/1.0', cookie: 'session=abc' },
      payload: { resources: [{ id: 'w' }] },
    });
    assert.equal(r.statusCode, 202);
    await h.app.inject({ url: '/v1/nodes/l1', headers: { authorization: `Bearer ${readToken}` } });
  });
  const incoming = lines.find((l) => l.msg === 'incoming request');
  assert.ok(incoming !== undefined, 'requests are logged');
  assert.equal(incoming.level, 30);
  assert.deepEqual(incoming.req, { method: 'POST', url: '/v1/nodes/l1/declarations', remoteAddress: '127.0.0.1' });
  const completed = lines.find((l) => l.msg === 'request completed' && (l.res as { statusCode: number }).statusCode === 202);
  assert.ok(completed !== undefined, 'the answer is logged with its status');
  assert.equal(typeof completed.token, 'string', 'the token is named by its id');
  assert.ok(!text.includes(sendToken) && !text.includes(readToken), 'no token value is in the log');
  assert.ok(!/authorization/i.test(text), 'no Authorization header is in the log');
  assert.ok(!text.includes('secret-agent') && !text.includes('session=abc'), 'other headers are not dumped either');
});

test('a token passed in the query string is redacted in every log line', async () => {
  const secret = 'query-secret-value-1';
  const { lines, text } = await logged('debug', async (h) => {
    await h.app.inject({ url: `/v1/nodes?access_token=${secret}` });
    await h.app.inject({ url: `/v1/nodes?limit=5&token=${secret}`, headers: { authorization: `Bearer ${readToken}` } });
    await h.app.inject({ url: `/no/such/route?Access_Token=${secret}` });
  });
  assert.ok(lines.length > 0, 'the requests are logged');
  assert.ok(!text.includes(secret), 'the token value is in no log line');
  const urls = lines.map((l) => (l.req as { url?: string } | undefined)?.url).filter((u) => u !== undefined);
  assert.ok(urls.includes('/v1/nodes?access_token=[redacted]'), 'the parameter is still named');
  assert.ok(urls.includes('/v1/nodes?limit=5&token=[redacted]'), 'other parameters stay as they are');
});
